package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/opstest"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type fixture struct {
	db     *pg.DB
	clock  *ops.ManualClock
	ledger *ops.Ledger
	tenant int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := pgtest.New(t)
	f := &fixture{db: db, clock: ops.NewManualClock(t0)}
	f.ledger = ops.NewLedger(db, f.clock)
	f.ledger.Register(refund.Kind(), llm.Kind(), jobs.Kind(false))
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ('acme') RETURNING id`).Scan(&f.tenant); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) refund(order string, cents int64) ops.Intent {
	return ops.Intent{TenantID: f.tenant, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: fmt.Sprintf("%s:%d:usd", order, cents), Fingerprint: fmt.Sprintf("fp-%s-%d", order, cents),
		OrderRef: order, AmountCents: cents, Currency: "usd", PaymentRef: "pi_1", Retention: 24 * time.Hour}
}

// seed builds operations in given states on the fixture's ledger.
func (f *fixture) seed() *opstest.Seeder { return opstest.New(f.ledger, f.db) }

// request is in as the client request ref, sent by owner, that a flow admits.
func request(in ops.Intent, ref, owner string) ops.Intent {
	in.RequestRef, in.Owner = ref, owner
	return in
}

func (f *fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// neverSent is a sender for a run the Ledger must refuse before any attempt.
func neverSent(t *testing.T) ops.Sender {
	return ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
		t.Error("the Ledger sent an attempt it must refuse")
		return ops.AttemptResult{Outcome: ops.OutcomeInvalid}
	})
}

// toUnknown opens an operation and leaves it unknown after a saved 500.
func (f *fixture) toUnknown(t *testing.T, order string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund(order, 3800), "req-1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeServerError, HTTPStatus: 500})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusUnknown {
		t.Fatalf("status %s, want unknown", op.Status)
	}
	return op
}

// ops rule 2: concurrent opens of one intent make one open operation; the losers read the winner.
func TestFiftyConcurrentOpensMakeOneOperation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	results := make([]ops.Admission, 50)
	errs := make([]error, 50)
	start := make(chan struct{})
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = f.ledger.Admit(ctx, request(f.refund("4417", 3800), fmt.Sprintf("toolu_%02d", i), fmt.Sprintf("w%d", i)))
		}()
	}
	close(start)
	wg.Wait()
	ids, created := map[string]bool{}, 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		ids[r.Op.ID] = true
		if r.Created {
			created++
			if r.Attempt == nil || r.Attempt.ProviderKey != r.Op.ProviderKey {
				t.Fatalf("the winner has no first attempt with the operation's key: %+v", r.Attempt)
			}
		}
	}
	if len(ids) != 1 || created != 1 {
		t.Fatalf("%d operations, %d created; want 1 and 1", len(ids), created)
	}
	if n := f.count(t, `SELECT count(*) FROM operations`); n != 1 {
		t.Fatalf("%d operation rows", n)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests`); n != 50 {
		t.Fatalf("%d client requests, want 50", n)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE duplicate`); n != 49 {
		t.Fatalf("%d duplicates, want 49", n)
	}
	if n := f.count(t, `SELECT count(*) FROM attempts`); n != 1 {
		t.Fatalf("%d attempts begun, want 1", n)
	}
}

func TestOpenWithOtherFingerprintIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := f.refund("1", 100)
	if _, err := f.seed().Open(ctx, in, "a", "w"); err != nil {
		t.Fatal(err)
	}
	in.Fingerprint = "other"
	adm, err := f.ledger.Admit(ctx, request(in, "b", "w"))
	if err != nil || adm.Verdict != ops.VerdictConflict {
		t.Fatalf("got %s %v, want a conflict", adm.Verdict, err)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'conflict'`); n != 1 {
		t.Fatalf("%d conflict answers, want 1", n)
	}
}

// ops rule 1: the provider key is committed with the operation before the first attempt, and every attempt reuses it.
func TestProviderKeyIsCommittedBeforeTheFirstAttemptAndReused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund("7", 700), "a", "w1")
	if err != nil {
		t.Fatal(err)
	}
	// Before anything is sent the key is on disk, readable by any other process.
	var key string
	if err := f.db.Pool.QueryRow(ctx, `SELECT provider_key FROM operations WHERE id = $1`, o.Op.ID).Scan(&key); err != nil || key != o.Op.ProviderKey || key == "" {
		t.Fatalf("stored key %q (%v), want %q", key, err, o.Op.ProviderKey)
	}
	op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	seed := opstest.New(f.ledger, f.db)
	op, err = seed.Release(ctx, op, "w1")
	if err != nil {
		t.Fatal(err)
	}
	// Another process takes it over and sends with the same key.
	op, err = seed.Claim(ctx, op, "w2")
	if err != nil {
		t.Fatal(err)
	}
	_, a2, err := seed.BeginAttempt(ctx, op, "w2")
	if err != nil {
		t.Fatal(err)
	}
	if a2.ProviderKey != key || a2.N != 2 {
		t.Fatalf("second attempt %+v, want n=2 with key %s", a2, key)
	}
	if n := f.count(t, `SELECT count(DISTINCT provider_key) FROM attempts WHERE operation_id = $1`, op.ID); n != 1 {
		t.Fatalf("%d distinct keys across attempts", n)
	}
}

// ops rule 6: closing is a compare-and-set on status and version; of two closers one wins and the other is told who did.
func TestTwoClosersRaceOneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.consumeOutbox(t)
	ctx := context.Background()
	op := f.toUnknown(t, "4417")
	f.clock.Advance(time.Minute)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, who := range []string{"ana@example.com", "ben@example.com"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: who,
				Evidence: ops.Evidence{Kind: ops.EvidenceLookup, ProviderRef: "re_" + who[:3], Summary: "found at Stripe"}})
		}()
	}
	wg.Wait()
	wins, losses := 0, 0
	var lost error
	for _, err := range errs {
		if err == nil {
			wins++
		} else {
			losses++
			lost = err
		}
	}
	if wins != 1 || losses != 1 {
		t.Fatalf("wins %d, losses %d: %v", wins, losses, errs)
	}
	var e *ops.Error
	if !errors.As(lost, &e) || e.Code != ops.ECONFLICT || e.Closed == nil {
		t.Fatalf("loser got %v, want a conflict naming the winner", lost)
	}
	final, err := f.db.Get(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Closed.ClosedBy != final.ClosedBy || final.ClosedBy == "" {
		t.Fatalf("loser told %q closed it, row says %q", e.Closed.ClosedBy, final.ClosedBy)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'close' AND entity_id = $1`, op.ID); n != 1 {
		t.Fatalf("%d close audit rows", n)
	}
	if n := f.count(t, `SELECT count(*) FROM outbox WHERE topic = 'operation.succeeded' AND entity_id = $1`, op.ID); n != 1 {
		t.Fatalf("%d outbox events", n)
	}
	if n := f.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'lookup'`, op.ID); n != 1 {
		t.Fatalf("%d lookup evidence rows", n)
	}
}

func TestCloseFromEveryStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	ev := ops.Evidence{Kind: ops.EvidenceLookup, ProviderRef: "re_9", Summary: "refund found"}
	build := map[ops.Status]func(order string) *ops.Operation{
		ops.StatusUnknown: func(order string) *ops.Operation { return f.toUnknown(t, order) },
		ops.StatusInProgress: func(order string) *ops.Operation {
			o, err := f.seed().Open(ctx, f.refund(order, 100), "r", "w")
			if err != nil {
				t.Fatal(err)
			}
			return o.Op
		},
		ops.StatusExpired: func(order string) *ops.Operation {
			op := f.toUnknown(t, order)
			if _, err := f.db.ExpireDue(ctx, "reaper", op.RetryUntil.Add(time.Second), 10); err != nil {
				t.Fatal(err)
			}
			op, err := f.db.Get(ctx, op.ID)
			if err != nil || op.Status != ops.StatusExpired {
				t.Fatalf("not expired: %v %v", op, err)
			}
			return op
		},
		ops.StatusSucceeded: func(order string) *ops.Operation {
			op := f.toUnknown(t, order)
			op, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "x", Evidence: ev})
			if err != nil {
				t.Fatal(err)
			}
			return op
		},
	}
	cases := []struct {
		from ops.Status
		to   ops.Status
		code string
	}{
		{ops.StatusUnknown, ops.StatusSucceeded, ""},
		{ops.StatusUnknown, ops.StatusFailed, ""},
		{ops.StatusExpired, ops.StatusSucceeded, ""},
		{ops.StatusExpired, ops.StatusFailed, ""},
		{ops.StatusInProgress, ops.StatusFailed, ops.ECONFLICT}, // a worker holds the lease
		{ops.StatusSucceeded, ops.StatusFailed, ops.ECONFLICT},
		{ops.StatusUnknown, ops.StatusInProgress, ops.EINVALID},
		{ops.StatusExpired, ops.StatusUnknown, ops.EINVALID},
	}
	for i, c := range cases {
		op := build[c.from](fmt.Sprintf("close-%d", i))
		got, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: c.to, Actor: "oncall", Evidence: ev})
		if ops.ErrorCode(err) != c.code {
			t.Fatalf("%s → %s: err %v, want code %q", c.from, c.to, err, c.code)
		}
		if err == nil && (got.Status != c.to || got.ClosedBy != "oncall" || got.ClosedAt == nil) {
			t.Fatalf("%s → %s: row %+v", c.from, c.to, got)
		}
		if err != nil {
			after, _ := f.db.Get(ctx, op.ID)
			if after.Version != op.Version {
				t.Fatalf("%s → %s refused but the row changed (version %d → %d)", c.from, c.to, op.Version, after.Version)
			}
		}
	}
}

func TestSendIsRefusedForUnknownExpiredAndPastRetention(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.consumeOutbox(t)
	ctx := context.Background()

	unknown := f.toUnknown(t, "u")
	if _, err := f.ledger.Run(ctx, unknown, neverSent(t), ops.RunSpec{Owner: "w1"}); ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("unknown: %v", err)
	}
	// The store refuses too, whatever a stale caller believes.
	stale := *unknown
	stale.Status, stale.Version = ops.StatusInProgress, unknown.Version
	if _, _, err := f.db.BeginAttempt(ctx, ops.BeginParams{ID: stale.ID, Version: stale.Version, Owner: "w1", Now: f.clock.Now(), MaxAttempts: 6}); ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("store sent an unknown operation: %v", err)
	}

	o, err := f.seed().Open(ctx, f.refund("r", 500), "r", "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Set(op.RetryUntil.Add(time.Second))
	op.LeaseUntil = ptr(f.clock.Now().Add(time.Minute)) // even a live lease does not help
	// The Ledger's own check before an attempt, which a Run would release the lease after.
	if err := ops.CheckSend(op, "w1", f.clock.Now(), f.ledger.Limits); ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("past retry_until: %v", err)
	}
	if _, _, err := f.db.BeginAttempt(ctx, ops.BeginParams{ID: op.ID, Version: op.Version, Owner: "w1", Now: f.clock.Now(), MaxAttempts: 6}); ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("store sent past retry_until: %v", err)
	}
	n, err := f.ledger.ExpireDue(ctx, "reaper")
	if err != nil || n != 2 {
		t.Fatalf("expired %d (%v), want 2 (the unknown and the timed-out one)", n, err)
	}
	expired, _ := f.db.Get(ctx, op.ID)
	if expired.Status != ops.StatusExpired {
		t.Fatalf("status %s, want expired", expired.Status)
	}
	if _, err := f.ledger.Run(ctx, expired, neverSent(t), ops.RunSpec{Owner: "w1"}); ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("expired: %v", err)
	}
	if n := f.count(t, `SELECT count(*) FROM attempts`); n != 2 {
		t.Fatalf("%d attempts, want only the 2 first ones", n)
	}
	if n := f.count(t, `SELECT count(*) FROM outbox WHERE topic = 'operation.expired'`); n != 2 {
		t.Fatalf("%d expiry events, want 2", n)
	}
}

// ops rule 4: an operation gets at most six attempts, however many calls ask.
func TestAttemptBudgetOfSixAcrossCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	timeouts := ops.SenderFunc(func(ctx context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		return ops.AttemptResult{Outcome: ops.OutcomeTimeout}
	})
	noSleep := func(context.Context, time.Duration) error { return nil }
	o, err := f.seed().Open(ctx, f.refund("b", 100), "call-1", "call-1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := f.ledger.Run(ctx, o.Op, timeouts, ops.RunSpec{Owner: "call-1", First: o.Attempt, Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusInProgress || op.Attempts != 3 {
		t.Fatalf("after one call: %s with %d attempts, want in_progress with 3", op.Status, op.Attempts)
	}
	// The first call released its lease: the second resumes the operation with its key.
	o2, err := f.ledger.Admit(ctx, request(f.refund("b", 100), "call-2", "call-2"))
	if err != nil || o2.Created || o2.Verdict != ops.VerdictSend || o2.Op.ID != op.ID {
		t.Fatalf("second call: %s %v created=%v", o2.Verdict, err, o2.Created)
	}
	op, err = f.ledger.Run(ctx, o2.Op, timeouts, ops.RunSpec{Owner: "call-2", Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusUnknown || op.Attempts != 6 {
		t.Fatalf("after two calls: %s with %d attempts, want unknown with 6", op.Status, op.Attempts)
	}
}

// ops rule 8: every client request and attempt of a lifecycle is recorded.
func TestSuccessfulLifecycleRecordsEverything(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.consumeOutbox(t)
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund("ok", 100), "r1", "w")
	if err != nil {
		t.Fatal(err)
	}
	ok := ops.SenderFunc(func(ctx context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		return ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200, ProviderRequestID: "req_1",
			Result: &ops.Result{ProviderRef: "re_123", Body: []byte(`{"id":"re_123"}`)}}
	})
	op, err := f.ledger.Run(ctx, o.Op, ok, ops.RunSpec{Owner: "w", First: o.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusSucceeded || op.ProviderRef != "re_123" || op.ClosedAt == nil || op.LeaseUntil != nil {
		t.Fatalf("row after success: %+v", op)
	}
	atts, err := f.db.Attempts(ctx, op.ID)
	if err != nil || len(atts) != 1 || atts[0].Outcome != ops.OutcomeOK || atts[0].ProviderRequestID != "req_1" {
		t.Fatalf("attempts %+v (%v)", atts, err)
	}
	if tl, err := deskstore.New(f.db).Timeline(ctx, op.ID); err != nil || len(tl.Evidence) != 1 || tl.Evidence[0].Kind != ops.EvidenceProviderResponse ||
		tl.Evidence[0].ProviderRef != "re_123" {
		t.Fatalf("evidence %+v (%v)", tl.Evidence, err)
	}
	if n := f.count(t, `SELECT count(*) FROM outbox WHERE entity_id = $1`, op.ID); n != 1 {
		t.Fatalf("%d outbox rows", n)
	}
	if tl, err := deskstore.New(f.db).Timeline(ctx, op.ID); err != nil || len(tl.Audit) != 2 || tl.Audit[0].Action != "open" || tl.Audit[1].Action != "attempt.ok" {
		t.Fatalf("audit trail %+v (%v), want open and attempt.ok", tl.Audit, err)
	}
	// Ops rule 9: the ledger refuses a success without the provider's record.
	o2, _ := f.seed().Open(ctx, f.refund("ok2", 100), "r2", "w")
	noRecord := ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
		return ops.AttemptResult{Outcome: ops.OutcomeOK}
	})
	if _, err := f.ledger.Run(ctx, o2.Op, noRecord, ops.RunSpec{Owner: "w", First: o2.Attempt}); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("success without provider record: %v", err)
	}
	// A closed intent opens a new operation for the next request, one that came after the
	// close (a request that came while it was open is its duplicate).
	f.clock.Advance(time.Second)
	o3, err := f.ledger.Admit(ctx, request(f.refund("ok", 100), "r3", "w"))
	if err != nil || !o3.Created || o3.Op.ID == op.ID || o3.Op.ProviderKey == op.ProviderKey {
		t.Fatalf("reopen after close: %+v %v", o3, err)
	}
}

func TestReaperResendsWithTheSameKeyOrMarksUnknown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var sentKeys []string
	var mu sync.Mutex
	sender := ops.SenderFunc(func(ctx context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		mu.Lock()
		sentKeys = append(sentKeys, a.ProviderKey)
		mu.Unlock()
		return ops.AttemptResult{Outcome: ops.OutcomeOK, Result: &ops.Result{ProviderRef: "re_reaped"}}
	})
	refund, err := f.seed().Open(ctx, f.refund("stall", 100), "r", "dead-worker")
	if err != nil {
		t.Fatal(err)
	}
	job := ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMJob, Provider: "llm", IntentKey: "job-1", Fingerprint: "f"}
	jobOp, err := f.seed().Open(ctx, job, "r", "dead-worker")
	if err != nil {
		t.Fatal(err)
	}
	old, err := f.seed().Open(ctx, f.refund("old", 100), "r", "dead-worker")
	if err != nil {
		t.Fatal(err)
	}
	r := &ops.Reaper{Ledger: f.ledger, Owner: "reaper", Senders: map[ops.Kind]ops.Sender{ops.KindRefund: sender, ops.KindLLMJob: sender},
		Sleep: func(context.Context, time.Duration) error { return nil }}
	// Nothing is stalled while the leases are live.
	if got, err := r.RunOnce(ctx); err != nil || got != (ops.Reaped{}) {
		t.Fatalf("early pass: %+v %v", got, err)
	}
	// Make "old" reach its retention while stalled.
	if _, err := f.db.Pool.Exec(ctx, `UPDATE operations SET retry_until = $2 WHERE id = $1`, old.Op.ID, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Hour)
	got, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Resent != 1 || got.Unknown != 1 || got.Expired != 1 {
		t.Fatalf("pass: %+v, want 1 resent, 1 unknown, 1 expired", got)
	}
	if len(sentKeys) != 1 || sentKeys[0] != refund.Op.ProviderKey {
		t.Fatalf("resent with %v, want once with %s", sentKeys, refund.Op.ProviderKey)
	}
	for id, want := range map[string]ops.Status{refund.Op.ID: ops.StatusSucceeded, jobOp.Op.ID: ops.StatusUnknown, old.Op.ID: ops.StatusExpired} {
		op, _ := f.db.Get(ctx, id)
		if op.Status != want {
			t.Fatalf("%s: %s, want %s", id, op.Status, want)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM attempts WHERE outcome = 'timeout' AND error_code = 'lease_expired'`); n != 3 {
		t.Fatalf("%d dangling attempts recorded as timeouts, want 3", n)
	}
}

// TestReaperAppliesTheOperationsOwnPolicy: a stalled LLM call of an interactive tenant and a
// stalled job generation under a resend setting are the client's and the job worker's to go
// on with, by the policy they were opened with; a reaper on a ledger whose defaults would make
// them unknown must not decide for them. A batch tenant's call is made unknown.
func TestReaperAppliesTheOperationsOwnPolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	open := func(kind ops.Kind, key string, pol ops.Policy) *ops.Operation {
		o, err := f.seed().Open(ctx, ops.Intent{TenantID: f.tenant, Kind: kind, Provider: "llm", IntentKey: key, Fingerprint: "f", Policy: &pol}, "r", "dead-worker")
		if err != nil {
			t.Fatal(err)
		}
		return o.Op
	}
	interactive := open(ops.KindLLMCall, "chat-1", ops.Policy{RetryUncertain: true, NoProviderKey: true})
	batch := open(ops.KindLLMCall, "chat-2", ops.Policy{RetryUncertain: false, NoProviderKey: true})
	job := open(ops.KindLLMJob, "job-2", ops.Policy{RetryUncertain: true, NoProviderKey: true}) // SETTLE_JOB_RETRY_UNCERTAIN=true
	other := ops.NewLedger(f.db, f.clock)
	other.Register(ops.KindSpec{Kind: ops.KindLLMCall, Name: "call"}, ops.KindSpec{Kind: ops.KindLLMJob, Name: "job"})
	// Within its clients' wait: the interactive call is released for its client's retry.
	r := &ops.Reaper{Ledger: other, Owner: "reaper", ClientWait: 2 * time.Hour}
	f.clock.Advance(time.Hour)
	got, err := r.RunOnce(ctx)
	if err != nil || got.Released != 2 || got.Unknown != 1 {
		t.Fatalf("pass: %+v %v, want 2 released and 1 unknown", got, err)
	}
	for id, want := range map[string]ops.Status{interactive.ID: ops.StatusInProgress, job.ID: ops.StatusInProgress, batch.ID: ops.StatusUnknown} {
		op, _ := f.db.Get(ctx, id)
		if op.Status != want || (want == ops.StatusInProgress && op.LeaseUntil != nil && op.LeaseUntil.After(f.clock.Now())) {
			t.Fatalf("%s: %s leased until %v, want %s and free to resume", id, op.Status, op.LeaseUntil, want)
		}
	}
}

// TestAnOperationKeepsThePolicyItWasOpenedWith: the policy an operation was opened with is
// the one every later step applies, whatever the defaults of the process that takes the
// step. A call opened as batch is made unknown by a reaper whose defaults would resend it;
// a refund opened without resends or lookups becomes unknown after a timeout finished by a
// ledger that would resend it, and then takes a person's note as failed where that ledger
// would ask for a lookup first (ops rules 5 and 11).
func TestAnOperationKeepsThePolicyItWasOpenedWith(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	batch := ops.Policy{RetryUncertain: false, NoProviderKey: true}
	call, err := f.seed().Open(ctx, ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "llm", IntentKey: "chat-batch",
		Fingerprint: "f", Policy: &batch}, "r", "dead-worker")
	if err != nil {
		t.Fatal(err)
	}
	noLookup := ops.Policy{RetryUncertain: false, HasLookup: false}
	in := f.refund("own-policy", 500)
	in.Policy = &noLookup
	ref, err := f.seed().Open(ctx, in, "r", "w1")
	if err != nil {
		t.Fatal(err)
	}
	// Another process, whose defaults resend every kind and look refunds up.
	other := ops.NewLedger(f.db, f.clock)
	other.Register(ops.KindSpec{Kind: ops.KindLLMCall, Name: "call", Policy: ops.Policy{RetryUncertain: true, NoProviderKey: true}},
		ops.KindSpec{Kind: ops.KindRefund, Name: "refund", Policy: ops.Policy{RetryUncertain: true, HasLookup: true}})

	sends := 0
	timeout := ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
		sends++
		return ops.AttemptResult{Outcome: ops.OutcomeTimeout}
	})
	op, err := other.Run(ctx, ref.Op, timeout, ops.RunSpec{Owner: "w1", First: ref.Attempt, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil || sends != 1 || op.Status != ops.StatusUnknown {
		t.Fatalf("timeout of a refund opened without resends: %s after %d sends %v, want unknown after 1", op.Status, sends, err)
	}
	closed, err := other.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusFailed, Actor: "ana",
		Evidence: ops.Evidence{Kind: ops.EvidenceNote, Summary: "the provider's dashboard shows nothing"}})
	if err != nil || closed.Status != ops.StatusFailed {
		t.Fatalf("failed close with a note of a refund opened without lookups: %v", err)
	}

	f.clock.Advance(time.Hour)
	got, err := (&ops.Reaper{Ledger: other, Owner: "reaper"}).RunOnce(ctx)
	if err != nil || got.Unknown != 1 || got.Released != 0 {
		t.Fatalf("pass: %+v %v, want the batch call unknown", got, err)
	}
	if cur, _ := f.db.Get(ctx, call.Op.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("batch call after the reaper: %s, want unknown", cur.Status)
	}
}

func TestQueueCountsAndPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for i := range 5 {
		f.toUnknown(t, fmt.Sprintf("q%d", i))
		f.clock.Advance(time.Second)
	}
	if _, err := f.seed().Open(ctx, f.refund("live", 1), "r", "w"); err != nil {
		t.Fatal(err)
	}
	counts, err := deskstore.New(f.db).QueueCounts(ctx, desk.QueueFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if counts[ops.StatusUnknown] != 5 || counts[ops.StatusInProgress] != 1 || counts[ops.StatusExpired] != 0 {
		t.Fatalf("counts %v", counts)
	}
	var all []string
	var after *desk.QueueCursor
	for {
		page, err := deskstore.New(f.db).ListQueue(ctx, desk.QueueFilter{Status: ops.StatusUnknown, Limit: 2, After: after}, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range page.Ops {
			all = append(all, op.OrderRef)
		}
		if page.Next == nil {
			break
		}
		after = page.Next
	}
	if fmt.Sprint(all) != "[q0 q1 q2 q3 q4]" {
		t.Fatalf("pages gave %v, want oldest first", all)
	}
	page, err := deskstore.New(f.db).ListQueue(ctx, desk.QueueFilter{Status: ops.StatusUnknown, Search: "q3"}, f.clock.Now())
	if err != nil || len(page.Ops) != 1 || page.Ops[0].OrderRef != "q3" {
		t.Fatalf("search: %v %v", page.Ops, err)
	}
	c2, err := deskstore.New(f.db).QueueCounts(ctx, desk.QueueFilter{OlderThan: 3 * time.Second, Now: f.clock.Now()})
	if err != nil || c2[ops.StatusUnknown] != 3 {
		t.Fatalf("aged counts %v %v", c2, err)
	}
	// The maintained counts agree with a scan after closes.
	op := page.Ops[0]
	if _, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "x",
		Evidence: ops.Evidence{Kind: ops.EvidenceLookup, ProviderRef: "re_q3", Summary: "refund re_q3 at Stripe"}}); err != nil {
		t.Fatal(err)
	}
	counts, _ = deskstore.New(f.db).QueueCounts(ctx, desk.QueueFilter{TenantID: f.tenant, Kind: ops.KindRefund})
	if want := f.count(t, `SELECT count(*) FROM operations WHERE status = 'unknown'`); counts[ops.StatusUnknown] != int64(want) || want != 4 {
		t.Fatalf("maintained count %d, scan %d", counts[ops.StatusUnknown], want)
	}
}

func ptr[T any](v T) *T { return &v }

// TestOpenNeedsARegisteredKindOrAPolicy: a ledger opens nothing of a kind nobody registered
// with it unless the intent names its policy: a guessed policy could resend what must not
// be, or let a note fail what needs a lookup first (ops rules 5 and 11).
func TestOpenNeedsARegisteredKindOrAPolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	bare := ops.NewLedger(f.db, f.clock)
	if _, err := bare.Admit(ctx, request(f.refund("unregistered", 100), "r", "w")); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("open of an unregistered kind: %v, want EINVALID", err)
	}
	if n := f.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Fatalf("%d operations written", n)
	}
	in := f.refund("own", 100)
	in.Policy = &ops.Policy{HasLookup: true}
	o, err := bare.Admit(ctx, request(in, "r", "w"))
	if err != nil || o.Op.Policy != *in.Policy {
		t.Fatalf("open with a policy: %+v %v", o.Op, err)
	}
	o, err = f.ledger.Admit(ctx, request(f.refund("registered", 100), "r", "w"))
	if err != nil || o.Op.Policy != (ops.Policy{RetryUncertain: true, HasLookup: true}) {
		t.Fatalf("open of a registered refund: %+v %v", o.Op, err)
	}
}
