package recon_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	stripelib "github.com/stripe/stripe-go/v76"
	stripeclient "github.com/stripe/stripe-go/v76/client"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/opstest"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// world is the reconciler wired for real: Postgres, the Stripe adapter on stripe-go, and
// the fake Stripe over loopback.
type world struct {
	db      *pg.DB
	clock   *ops.ManualClock
	fake    *fake.Stripe
	base    string
	outside *stripeclient.API // someone else's Stripe client: a broken service, the Stripe dashboard
	adapter *stripe.Adapter
	ledger  *ops.Ledger
	recon   *recon.Reconciler
	tenant  int64
}

const pi = "pi_recon"

func newWorld(t *testing.T) *world {
	t.Helper()
	db := pgtest.New(t)
	// Whole seconds: Stripe's created filter is in seconds.
	w := &world{db: db, clock: ops.NewManualClock(time.Now().UTC().Truncate(time.Second).Add(-2 * time.Hour))}
	w.fake = fake.NewStripe(fake.StripeOptions{Clock: w.clock.Now, Seed: 1})
	base, err := w.fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.fake.Close() })
	w.base = base
	w.fake.AddPaymentIntent(pi, 100_000, "usd", fake.OwnedBy("shop"))
	w.outside = stripeclient.New("sk_test_outside", &stripelib.Backends{API: stripelib.GetBackendWithConfig(stripelib.APIBackend,
		&stripelib.BackendConfig{URL: stripelib.String(base), MaxNetworkRetries: stripelib.Int64(0),
			LeveledLogger: &stripelib.LeveledLogger{Level: stripelib.LevelNull}})})
	w.adapter = stripe.New(stripe.Config{APIKey: "sk_test_settle", BaseURL: base, AttemptTimeout: 300 * time.Millisecond, ReadsPerSecond: 50})
	w.ledger = ops.NewLedger(db, w.clock)
	w.ledger.Register(refund.Kind())
	w.recon = &recon.Reconciler{Ledger: w.ledger, Store: reconstore.New(db), Events: db, Leases: db, Refunds: []recon.RefundSource{w.adapter}, Owner: "test-replica"}
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ('shop') RETURNING id`).Scan(&w.tenant); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := w.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// seed builds operations in given states on the world's ledger.
func (w *world) seed() *opstest.Seeder { return opstest.New(w.ledger, w.db) }

// open opens a refund operation leased to "w1", its first attempt begun.
func (w *world) open(t *testing.T, order string, cents int64) ops.Admission {
	t.Helper()
	o, err := w.seed().Open(context.Background(), ops.Intent{TenantID: w.tenant, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: refund.IntentKey(order, cents, "usd"), Fingerprint: "fp-" + order, OrderRef: order, PaymentRef: pi,
		AmountCents: cents, Currency: "usd", Retention: 24 * time.Hour}, "req-"+order, "w1")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// refund sends the operation's refund to the fake for real, with its key and id.
func (w *world) send(t *testing.T, o ops.Admission) ops.AttemptResult {
	t.Helper()
	return w.adapter.Send(context.Background(), o.Op, o.Attempt)
}

// succeeded opens an operation and refunds it, as the refund tool does.
func (w *world) succeeded(t *testing.T, order string, cents int64) *ops.Operation {
	t.Helper()
	o := w.open(t, order, cents)
	res := w.send(t, o)
	op, err := w.seed().Finish(context.Background(), o.Op, o.Attempt, "w1", res)
	if err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("refund %s: %+v (%v)", order, op, err)
	}
	return op
}

// unknown opens operations whose refunds the fake commits while the attempts time out, and
// leaves them unknown.
func (w *world) unknown(t *testing.T, cents int64, orders ...string) []*ops.Operation {
	t.Helper()
	ctx := context.Background()
	w.fake.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultTimeoutAfterCommit, Delay: 600 * time.Millisecond})
	defer w.fake.ClearFaults()
	held := len(w.fake.Refunds())
	var out []*ops.Operation
	for i, order := range orders {
		o := w.open(t, order, cents+int64(i))
		res := w.send(t, o)
		if res.Outcome != ops.OutcomeTimeout {
			t.Fatalf("send %s: %+v, want a timeout", order, res)
		}
		op, err := w.seed().Finish(ctx, o.Op, o.Attempt, "w1", res)
		if err != nil {
			t.Fatal(err)
		}
		if op.Status != ops.StatusUnknown {
			if op, err = w.seed().Release(ctx, op, "w1"); err != nil {
				t.Fatal(err)
			}
			if op, err = w.seed().MarkUnknown(ctx, op, "test", "timed out"); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, op)
	}
	w.waitForFakeRefunds(t, held+len(orders))
	return out
}

// waitForFakeRefunds waits until the fake holds n refunds: the fake commits a refund the
// adapter gave up on when its handler runs, which on a busy machine is well after the
// adapter's timeout.
func (w *world) waitForFakeRefunds(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(w.fake.Refunds()) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the fake committed %d refunds after 10 s, want %d", len(w.fake.Refunds()), n)
		}
	}
}

// outsideRefund creates a refund nobody recorded, with the given metadata.
func (w *world) outsideRefund(t *testing.T, cents int64, metadata map[string]string) *stripelib.Refund {
	t.Helper()
	p := &stripelib.RefundParams{PaymentIntent: stripelib.String(pi), Amount: stripelib.Int64(cents), Metadata: metadata}
	r, err := w.outside.Refunds.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (w *world) window() recon.Window {
	w.clock.Advance(time.Second) // past the last refund's second
	now := w.clock.Now()
	return recon.Window{From: now.Add(-time.Hour), To: now}
}

func TestDoubleAndOrphanRefundsAreReportedOnceAcrossRuns(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	op := w.succeeded(t, "100", 3800)
	// A broken client sends the same refund again with a new key: a second refund carrying
	// the same operation id.
	double := w.outsideRefund(t, 3800, map[string]string{stripe.MetadataKey: op.ID})
	orphan := w.outsideRefund(t, 1200, nil)
	malformed := w.outsideRefund(t, 500, map[string]string{stripe.MetadataKey: "'; DROP TABLE operations; --"})
	foreign := w.outsideRefund(t, 700, map[string]string{stripe.MetadataKey: ops.NewOperationID()})
	win := w.window()

	first, err := w.recon.Reconcile(ctx, "stripe", win)
	if err != nil {
		t.Fatal(err)
	}
	// The first refund was recorded when our attempt got Stripe's answer; the others are new.
	if first.Listed != 5 || first.NewCharges != 4 || first.DoubleCharges != 1 || first.Orphans != 3 || first.Missing != 0 || first.NewExceptions != 4 {
		t.Fatalf("first run: %s", first.Summary())
	}
	second, err := w.recon.Reconcile(ctx, "stripe", win)
	if err != nil {
		t.Fatal(err)
	}
	if second.Listed != 5 || second.NewCharges != 0 || second.NewExceptions != 0 || second.SeenExceptions != 4 {
		t.Fatalf("second run: %s", second.Summary())
	}
	// The background run covers the same refunds again: still nothing new.
	w.clock.Advance(time.Minute)
	reps, err := w.recon.RunOnce(ctx)
	if err != nil || len(reps) != 1 || reps[0].NewCharges != 0 || reps[0].NewExceptions != 0 {
		t.Fatalf("background run: %+v (%v)", reps, err)
	}

	if n := w.count(t, `SELECT count(*) FROM provider_charges`); n != 5 {
		t.Fatalf("%d provider charges recorded, want 5", n)
	}
	if n := w.count(t, `SELECT count(*) FROM recon_exceptions`); n != 4 {
		t.Fatalf("%d exceptions, want 4", n)
	}
	if n := w.count(t, `SELECT count(*) FROM audit_log WHERE entity = 'recon_exception'`); n != 4 {
		t.Fatalf("%d exception audit rows, want one per exception", n)
	}
	var refs []string
	if err := w.db.Pool.QueryRow(ctx, `SELECT charge_refs FROM recon_exceptions WHERE kind = 'double_charge' AND operation_id = $1`, op.ID).Scan(&refs); err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || !contains(refs, op.ProviderRef) || !contains(refs, double.ID) {
		t.Fatalf("double charge names %v, want %s and %s", refs, op.ProviderRef, double.ID)
	}
	for _, ref := range []string{orphan.ID, malformed.ID, foreign.ID} {
		if n := w.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'orphan_charge' AND ref = $1 AND status = 'open'`, ref); n != 1 {
			t.Fatalf("orphan %s: %d open exceptions, want 1", ref, n)
		}
	}
	if n := w.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'double_charge' AND severity = 'high' AND amount_cents = 3800`); n != 1 {
		t.Fatalf("the double charge is not high severity with 38.00 lost")
	}
	if n := w.count(t, `SELECT seen_count FROM recon_exceptions WHERE kind = 'double_charge'`); n != 3 {
		t.Fatalf("double charge seen %d times, want 3", n)
	}
}

func TestReconcilerClosesUnknownButLeavesWhatAPersonClosed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	both := w.unknown(t, 2500, "200", "201")
	u, p := both[0], both[1]
	refundOf := map[string]string{}
	for _, r := range w.fake.Refunds() {
		refundOf[r.Metadata[stripe.MetadataKey]] = r.ID
	}

	// A person closes p with the refund they found in Stripe's dashboard, just after the
	// reconciler read it and before its close lands: the reconciler's compare-and-set loses.
	person := ops.NewLedger(w.db, w.clock)
	hooked := &racingStore{DB: w.db, target: p.ID, before: func() {
		if _, err := person.Close(ctx, ops.CloseParams{ID: p.ID, Version: p.Version, To: ops.StatusSucceeded, Actor: "oncall@example.com",
			Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: refundOf[p.ID], Summary: "Found it in the dashboard."}}); err != nil {
			t.Errorf("person close: %v", err)
		}
	}}
	w.recon.Ledger = ops.NewLedger(hooked, w.clock)

	rep, err := w.recon.Reconcile(ctx, "stripe", w.window())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Closed != 1 || rep.NewExceptions != 1 || rep.NewCharges != 2 {
		t.Fatalf("run: %s", rep.Summary())
	}
	gotU, _ := w.db.Get(ctx, u.ID)
	if gotU.Status != ops.StatusSucceeded || gotU.ProviderRef != refundOf[u.ID] || gotU.ClosedBy != "stripe reconciliation (test-replica)" {
		t.Fatalf("unknown operation: %s %s by %q", gotU.Status, gotU.ProviderRef, gotU.ClosedBy)
	}
	if n := w.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'reconciliation' AND provider_ref = $2`, u.ID, refundOf[u.ID]); n != 1 {
		t.Fatalf("%d reconciliation evidence rows for the closed operation, want 1", n)
	}
	if n := w.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'explained_unknown' AND operation_id = $1 AND status = 'resolved'`, u.ID); n != 1 {
		t.Fatalf("no resolved explained_unknown exception for %s", u.ID)
	}
	gotP, _ := w.db.Get(ctx, p.ID)
	if gotP.Status != ops.StatusSucceeded || gotP.ClosedBy != "oncall@example.com" {
		t.Fatalf("the person's operation is %s by %q", gotP.Status, gotP.ClosedBy)
	}
	if n := w.count(t, `SELECT count(*) FROM audit_log WHERE entity = 'operation' AND entity_id = $1 AND action = 'close'`, p.ID); n != 1 {
		t.Fatalf("%d close audit rows on the person's operation, want 1", n)
	}
	if n := w.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'reconciliation'`, p.ID); n != 0 {
		t.Fatalf("the reconciler wrote evidence on an operation a person closed")
	}
	if !hooked.fired.Load() {
		t.Fatal("the race was not staged")
	}
	// Its charge is still recorded: the provider billed it whoever closed it.
	if n := w.count(t, `SELECT count(*) FROM provider_charges WHERE operation_id = $1`, p.ID); n != 1 {
		t.Fatalf("%d charges recorded for the person's operation", n)
	}
}

// racingStore runs before just before the ledger's second read of target (the one Close
// makes), returning the row as it was: the person's close lands between the read and the
// compare-and-set.
type racingStore struct {
	*pg.DB
	target string
	before func()
	reads  atomic.Int32
	fired  atomic.Bool
}

func (s *racingStore) Get(ctx context.Context, id string) (*ops.Operation, error) {
	op, err := s.DB.Get(ctx, id)
	if id == s.target && s.reads.Add(1) == 2 {
		s.before()
		s.fired.Store(true)
	}
	return op, err
}

func TestPersonAndReconcilerNeverBothCloseARow(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	opsList := w.unknown(t, 1000, "300", "301", "302", "303", "304", "305", "306", "307")
	refundOf := map[string]string{}
	for _, r := range w.fake.Refunds() {
		refundOf[r.Metadata[stripe.MetadataKey]] = r.ID
	}
	win := w.window()
	person := ops.NewLedger(w.db, w.clock)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if _, err := w.recon.Reconcile(ctx, "stripe", win); err != nil {
			t.Errorf("reconcile: %v", err)
		}
	}()
	go func() {
		defer wg.Done()
		for _, op := range opsList {
			_, err := person.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "oncall@example.com",
				Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: refundOf[op.ID], Summary: "Checked in Stripe."}})
			if err != nil && ops.ErrorCode(err) != ops.ECONFLICT {
				t.Errorf("person close: %v", err)
			}
		}
	}()
	wg.Wait()
	byRecon := 0
	for _, op := range opsList {
		if n := w.count(t, `SELECT count(*) FROM audit_log WHERE entity = 'operation' AND entity_id = $1 AND action = 'close'`, op.ID); n != 1 {
			t.Fatalf("operation %s closed %d times", op.ID, n)
		}
		got, _ := w.db.Get(ctx, op.ID)
		if got.ClosedBy != "oncall@example.com" {
			byRecon++
		}
	}
	if n := w.count(t, `SELECT count(*) FROM recon_exceptions WHERE kind = 'explained_unknown'`); n != byRecon {
		t.Fatalf("%d explained_unknown exceptions, but the reconciler closed %d", n, byRecon)
	}
}

func TestTwoReconcilersAtOnceOnlyOneActs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	w.outsideRefund(t, 900, nil)
	win := w.window()
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	blocking := &gatedSource{RefundSource: w.adapter, calls: &calls, entered: entered, release: release}
	a := &recon.Reconciler{Ledger: w.ledger, Store: reconstore.New(w.db), Events: w.db, Leases: w.db, Refunds: []recon.RefundSource{blocking}, Owner: "replica-a"}
	b := &recon.Reconciler{Ledger: w.ledger, Store: reconstore.New(w.db), Events: w.db, Leases: w.db, Refunds: []recon.RefundSource{blocking}, Owner: "replica-b"}
	done := make(chan recon.Report, 1)
	go func() {
		rep, err := a.Reconcile(ctx, "stripe", win)
		if err != nil {
			t.Errorf("a: %v", err)
		}
		done <- rep
	}()
	<-entered
	repB, err := b.Reconcile(ctx, "stripe", win)
	if err != nil {
		t.Fatal(err)
	}
	if !repB.Skipped || len(repB.Holder) < 9 || repB.Holder[:9] != "replica-a" {
		t.Fatalf("b while a runs: %+v, want skipped naming replica-a", repB)
	}
	bg, err := b.RunOnce(ctx)
	if err != nil || !bg[0].Skipped {
		t.Fatalf("b's background run while a runs: %+v (%v)", bg, err)
	}
	close(release)
	repA := <-done
	if repA.Skipped || repA.Orphans != 1 {
		t.Fatalf("a: %s", repA.Summary())
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the provider was listed %d times, want once", n)
	}
	// The lease is free again: b acts now, and finds nothing new.
	repB, err = b.Reconcile(ctx, "stripe", win)
	if err != nil || repB.Skipped || repB.NewCharges != 0 || repB.NewExceptions != 0 {
		t.Fatalf("b after a: %+v (%v)", repB, err)
	}
}

// gatedSource holds the first listing until release, so a test can run a second
// reconciler while the first one is in the middle of its run.
type gatedSource struct {
	recon.RefundSource
	calls   *atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (g *gatedSource) ListRefunds(ctx context.Context, from, to time.Time, each func([]ops.ProviderRecord) error) error {
	if g.calls.Add(1) == 1 {
		close(g.entered)
		<-g.release
	}
	return g.RefundSource.ListRefunds(ctx, from, to, each)
}

func TestMissingChargeIsReportedOnceAndLateRefundsAreFound(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	// An operation closed as succeeded with a refund id Stripe never made.
	o := w.open(t, "400", 4000)
	ghost, err := w.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
		Result: &ops.Result{ProviderRef: "re_ghost"}})
	if err != nil {
		t.Fatal(err)
	}
	// An operation whose refund was made an hour and a half later, outside the window read.
	late := w.open(t, "401", 4100)
	w.clock.Advance(90 * time.Minute)
	res := w.send(t, late)
	if _, err := w.seed().Finish(ctx, late.Op, late.Attempt, "w1", res); err != nil {
		t.Fatal(err)
	}
	now := w.clock.Now()
	win := recon.Window{From: now.Add(-2 * time.Hour), To: now.Add(-time.Hour)}

	rep, err := w.recon.Reconcile(ctx, "stripe", win)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Listed != 0 || rep.Looked != 2 || rep.Missing != 1 || rep.NewCharges != 0 || rep.NewExceptions != 1 {
		t.Fatalf("run: %s", rep.Summary())
	}
	var sev, status string
	if err := w.db.Pool.QueryRow(ctx, `SELECT severity, status FROM recon_exceptions WHERE kind = 'missing_charge' AND operation_id = $1`, ghost.ID).Scan(&sev, &status); err != nil {
		t.Fatal(err)
	}
	if sev != "critical" || status != "open" {
		t.Fatalf("missing charge is %s/%s", sev, status)
	}
	again, err := w.recon.Reconcile(ctx, "stripe", win)
	if err != nil || again.Looked != 0 || again.NewExceptions != 0 {
		t.Fatalf("second run: %s (%v)", again.Summary(), err)
	}
}

func TestFailedPageLeavesTheRunResumable(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	for i := range 105 {
		w.outsideRefund(t, 10, map[string]string{"n": fmt.Sprint(i)})
	}
	w.clock.Advance(time.Second)
	// The window is listed in two parts at once: an empty older half (one page) and the
	// newer half with the 105 refunds (two pages). Whatever their order, failing the second
	// and third page reads fails the newer half before it hands anything on.
	w.fake.AddFault(fake.Fault{Method: "GET", Path: "/v1/refunds", Calls: []int{2, 3}, Kind: fake.FaultUnavailable})
	reps, err := w.recon.RunOnce(ctx)
	if err == nil {
		t.Fatalf("a failed page passed unnoticed: %+v", reps)
	}
	var done *time.Time
	_ = w.db.Pool.QueryRow(ctx, `SELECT done_until FROM recon_runs WHERE name = 'reconcile:stripe'`).Scan(&done)
	if done != nil {
		t.Fatalf("a failed run moved the watermark to %s", done)
	}
	w.fake.ClearFaults() // the third read may not have come yet
	w.clock.Advance(time.Minute)
	reps, err = w.recon.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if reps[0].Listed != 105 || reps[0].NewCharges != 105 || reps[0].Orphans != 105 {
		t.Fatalf("resumed run: %s", reps[0].Summary())
	}
	if n := w.count(t, `SELECT count(*) FROM provider_charges`); n != 105 {
		t.Fatalf("%d charges, want 105", n)
	}
	if n := w.count(t, `SELECT count(*) FROM recon_exceptions`); n != 105 {
		t.Fatalf("%d exceptions, want 105", n)
	}
	_ = w.db.Pool.QueryRow(ctx, `SELECT done_until FROM recon_runs WHERE name = 'reconcile:stripe'`).Scan(&done)
	if done == nil || !done.Equal(w.clock.Now()) {
		t.Fatalf("watermark %v, want %s", done, w.clock.Now())
	}
}

func TestBadWindowsAreRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	now := w.clock.Now()
	cases := map[string]recon.Window{
		"reversed": {From: now.Add(-time.Hour), To: now.Add(-2 * time.Hour)},
		"empty":    {From: now.Add(-time.Hour), To: now.Add(-time.Hour)},
		"future":   {From: now.Add(-time.Hour), To: now.Add(time.Hour)},
		"ahead":    {From: now.Add(time.Hour), To: now.Add(2 * time.Hour)},
	}
	for name, win := range cases {
		_, err := w.recon.Reconcile(context.Background(), "stripe", win)
		if ops.ErrorCode(err) != ops.EINVALID {
			t.Errorf("%s window: %v, want invalid", name, err)
		}
	}
	if _, err := w.recon.Reconcile(context.Background(), "paypal", recon.Window{From: now.Add(-time.Hour), To: now}); ops.ErrorCode(err) != ops.EINVALID {
		t.Errorf("unknown provider: %v", err)
	}
	if n := w.count(t, `SELECT count(*) FROM leases`); n != 0 {
		t.Fatalf("a refused window took the lease")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// oneByOne hands the listing on one record at a time, so each record is a batch of its own.
type oneByOne struct{ recon.RefundSource }

func (s oneByOne) ListRefunds(ctx context.Context, from, to time.Time, each func([]ops.ProviderRecord) error) error {
	return s.RefundSource.ListRefunds(ctx, from, to, func(batch []ops.ProviderRecord) error {
		for _, rec := range batch {
			if err := each([]ops.ProviderRecord{rec}); err != nil {
				return err
			}
		}
		return nil
	})
}

// A double charge is found even when its charges come in different batches and none was
// recorded before the run, and a third charge in a later batch widens the same exception:
// one double in the report, all three charges and both extra amounts in the exception.
func TestDoubleChargeAcrossBatchesIsReportedOnceWithEveryCharge(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	op := w.unknown(t, 2500, "500")[0]
	w.outsideRefund(t, 2500, map[string]string{stripe.MetadataKey: op.ID})
	w.outsideRefund(t, 2500, map[string]string{stripe.MetadataKey: op.ID})
	w.recon.Refunds = []recon.RefundSource{oneByOne{w.adapter}}
	rep, err := w.recon.Reconcile(ctx, "stripe", w.window())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Listed != 3 || rep.DoubleCharges != 1 || rep.Closed != 1 || rep.NewExceptions != 2 || rep.SeenExceptions != 0 {
		t.Fatalf("report: %s", rep.Summary())
	}
	var refs []string
	var extra int64
	if err := w.db.Pool.QueryRow(ctx, `SELECT charge_refs, amount_cents FROM recon_exceptions
WHERE kind = 'double_charge' AND operation_id = $1`, op.ID).Scan(&refs, &extra); err != nil {
		t.Fatal(err)
	}
	if len(refs) != 3 || extra != 5000 {
		t.Fatalf("the double charge names %v and %d cents more than once, want 3 charges and 5000", refs, extra)
	}
}

// A run that only confirms the charges the write path recorded marks them reconciled and
// nothing else: their seen_at stays, so the rollups and the charge alerts, which count the
// charges seen in a window, do not count them a second time.
func TestConfirmedChargesAreMarkedReconciledOnly(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	op := w.succeeded(t, "600", 3800)
	var seen time.Time
	if err := w.db.Pool.QueryRow(ctx, `SELECT seen_at FROM provider_charges WHERE charge_ref = $1`, op.ProviderRef).Scan(&seen); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(10 * time.Minute)
	rep, err := w.recon.Reconcile(ctx, "stripe", recon.Window{From: w.clock.Now().Add(-time.Hour), To: w.clock.Now()})
	if err != nil || rep.Listed != 1 || rep.NewCharges != 0 {
		t.Fatalf("%+v (%v)", rep, err)
	}
	var after time.Time
	var reconciled *time.Time
	if err := w.db.Pool.QueryRow(ctx, `SELECT seen_at, reconciled_at FROM provider_charges WHERE charge_ref = $1`, op.ProviderRef).
		Scan(&after, &reconciled); err != nil {
		t.Fatal(err)
	}
	if !after.Equal(seen) || reconciled == nil || !reconciled.Equal(w.clock.Now()) {
		t.Fatalf("seen_at %v → %v, reconciled_at %v; want seen_at kept and reconciled at %v", seen, after, reconciled, w.clock.Now())
	}
}

// A charge that only confirms its operation still shows a double charge when another
// charge of that operation was recorded before, outside the window read (here as a webhook
// would have recorded it): the double is found with the confirming charge.
func TestConfirmingChargeRevealsADoubleRecordedEarlier(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	op := w.succeeded(t, "700", 3800)
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, amount_cents,
	currency, status, charged_at, seen_at, reconciled_at)
VALUES ($1, 'stripe', 're_earlier_700', $2, 3800, 'usd', 'succeeded', $3, $3, $3)`, w.tenant, op.ID, w.clock.Now().Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	rep, err := w.recon.Reconcile(ctx, "stripe", w.window())
	if err != nil || rep.Listed != 1 || rep.DoubleCharges != 1 {
		t.Fatalf("%+v (%v), want the one listed charge to reveal a double", rep, err)
	}
	var refs []string
	if err := w.db.Pool.QueryRow(ctx, `SELECT charge_refs FROM recon_exceptions WHERE kind = 'double_charge' AND operation_id = $1`,
		op.ID).Scan(&refs); err != nil || len(refs) != 2 {
		t.Fatalf("double charge names %v (%v)", refs, err)
	}
}

// twice hands every batch on two times, as a listing that overlaps itself would.
type twice struct{ recon.RefundSource }

func (s twice) ListRefunds(ctx context.Context, from, to time.Time, each func([]ops.ProviderRecord) error) error {
	return s.RefundSource.ListRefunds(ctx, from, to, func(batch []ops.ProviderRecord) error {
		if err := each(batch); err != nil {
			return err
		}
		return each(batch)
	})
}

// A charge that confirms its operation but was not recorded yet counts as new once, however
// often the listing hands it on.
func TestAChargeListedTwiceIsNewOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	op := w.succeeded(t, "800", 3800)
	if _, err := w.db.Pool.Exec(ctx, `DELETE FROM provider_charges WHERE charge_ref = $1`, op.ProviderRef); err != nil {
		t.Fatal(err)
	}
	w.recon.Refunds = []recon.RefundSource{twice{w.adapter}}
	rep, err := w.recon.Reconcile(ctx, "stripe", w.window())
	if err != nil || rep.Listed != 2 || rep.NewCharges != 1 || rep.DoubleCharges != 0 {
		t.Fatalf("%+v (%v), want one new charge from two listings of it", rep, err)
	}
	if n := w.count(t, `SELECT count(*) FROM provider_charges WHERE charge_ref = $1 AND reconciled_at IS NOT NULL`, op.ProviderRef); n != 1 {
		t.Fatalf("%d reconciled rows for the charge, want 1", n)
	}
}
