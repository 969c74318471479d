package retainstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/retain"
)

// retainNow is the clock of the retention tests: long after the operations they seed.
var retainNow = time.Date(2027, 6, 15, 12, 0, 0, 0, time.UTC)

const retainKeep = 400 * 24 * time.Hour

// rowsOf counts the rows of every table that hang from operation id.
func rowsOf(t *testing.T, f *fixture, id string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for table, q := range map[string]string{
		"operations":       `SELECT count(*) FROM operations WHERE id = $1::uuid`,
		"client_requests":  `SELECT count(*) FROM client_requests WHERE operation_id = $1::uuid`,
		"attempts":         `SELECT count(*) FROM attempts WHERE operation_id = $1::uuid`,
		"evidence":         `SELECT count(*) FROM evidence WHERE operation_id = $1::uuid`,
		"audit_log":        `SELECT count(*) FROM audit_log WHERE entity_id = $1`,
		"attempt finishes": `SELECT count(*) FROM attempts WHERE operation_id = $1::uuid AND audit_id IS NOT NULL`,
		"outbox delivered": `SELECT count(*) FROM outbox WHERE entity_id = $1 AND published_at IS NOT NULL`,
		"provider_charges": `SELECT count(*) FROM provider_charges WHERE operation_id = $1::uuid`,
		"provider_events":  `SELECT count(*) FROM provider_events WHERE operation_id = $1::uuid`,
		"jobs":             `SELECT count(*) FROM jobs WHERE operation_id = $1::uuid`,
	} {
		out[table] = f.Count(t, q, id)
	}
	return out
}

func newRetention(f *fixture, clock ops.Clock) *retain.Retention {
	return &retain.Retention{Store: f.retain, Clock: clock, Keep: retainKeep, Batch: 10, Actor: "retention:test"}
}

// TestRetentionRemovesClosedHistoryAndKeepsOpenOperations: closed operations whose closing is
// older than the retention go with every row hanging from them; open ones of any age stay
// with theirs, as do a closed one an unresolved exception still names, recent closed ones,
// undelivered events and the rollups.
func TestRetentionRemovesClosedHistoryAndKeepsOpenOperations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old := retainNow.Add(-500 * 24 * time.Hour)
	oldClose := old.Add(time.Hour)
	recentClose := retainNow.Add(-10 * 24 * time.Hour)
	gone := []string{
		seedHistory(t, f.DB, f.Tenant, ops.StatusSucceeded, ops.KindRefund, old, &oldClose),
		seedHistory(t, f.DB, f.Tenant, ops.StatusFailed, ops.KindLLMCall, old, &oldClose),
		seedHistory(t, f.DB, f.Tenant, ops.StatusSucceeded, ops.KindLLMJob, old, &oldClose),
	}
	kept := map[string]string{
		"unknown for 500 days": seedHistory(t, f.DB, f.Tenant, ops.StatusUnknown, ops.KindRefund, old, nil),
		"expired for 500 days": seedHistory(t, f.DB, f.Tenant, ops.StatusExpired, ops.KindRefund, old, nil),
		"received long ago":    seedHistory(t, f.DB, f.Tenant, ops.StatusReceived, ops.KindLLMCall, old, nil),
		"in progress":          seedHistory(t, f.DB, f.Tenant, ops.StatusInProgress, ops.KindLLMJob, old, nil),
		"closed recently":      seedHistory(t, f.DB, f.Tenant, ops.StatusSucceeded, ops.KindRefund, old, &recentClose),
		"open exception":       seedHistory(t, f.DB, f.Tenant, ops.StatusSucceeded, ops.KindRefund, old, &oldClose),
	}
	if _, err := f.DB.Pool.Exec(ctx, `INSERT INTO recon_exceptions (kind, provider, ref, operation_id, severity, summary,
		first_seen_at, last_seen_at, updated_at) VALUES ('double_charge', 'stripe', $1, $3::uuid, 'high', 's', $2, $2, $2)`,
		kept["open exception"], oldClose, kept["open exception"]); err != nil {
		t.Fatal(err)
	}
	if _, err := f.DB.Pool.Exec(ctx, `INSERT INTO recon_exceptions (kind, provider, ref, operation_id, severity, summary,
		status, first_seen_at, last_seen_at, updated_at, resolved_at) VALUES ('missing_charge', 'stripe', $1, $3::uuid, 'low', 's',
		'resolved', $2, $2, $2, $2)`, gone[0], oldClose, gone[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := f.DB.Pool.Exec(ctx, `INSERT INTO rollups (width_seconds, start, tenant_id, kind, provider, operations, computed_at)
		VALUES (3600, $1, $2, 'refund', 'stripe', 7, $1)`, old.Truncate(time.Hour), f.Tenant); err != nil {
		t.Fatal(err)
	}
	before := map[string]map[string]int{}
	for name, id := range kept {
		before[name] = rowsOf(t, f, id)
	}

	rep, err := newRetention(f, ops.NewManualClock(retainNow)).RunOnce(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Operations != 3 || rep.Due != 3 {
		t.Fatalf("removed %d operations of %d due, want 3: %+v", rep.Operations, rep.Due, rep)
	}
	for _, id := range gone {
		for table, n := range rowsOf(t, f, id) {
			if n != 0 {
				t.Errorf("removed operation %s still has %d rows in %s", id, n, table)
			}
		}
		if n := f.Count(t, `SELECT count(*) FROM outbox WHERE entity_id = $1 AND published_at IS NULL`, id); n != 1 {
			t.Errorf("operation %s: %d undelivered events left, want 1 (never removed before delivery)", id, n)
		}
	}
	for name, id := range kept {
		if got := rowsOf(t, f, id); fmt.Sprint(got) != fmt.Sprint(before[name]) {
			t.Errorf("%s: rows %v after the pass, want %v", name, got, before[name])
		}
	}
	for q, want := range map[string]int{
		`SELECT count(*) FROM job_checkpoints`:              1,
		`SELECT count(*) FROM job_outbox`:                   1,
		`SELECT count(*) FROM recon_exceptions`:             1,
		`SELECT count(*) FROM rollups WHERE operations = 7`: 1,
		`SELECT count(*) FROM audit_log WHERE entity = 'retention' AND action = 'retention.pass'
			AND (after->>'operations')::int = 3 AND (after->>'attempts')::int = 3`: 1,
	} {
		if got := f.Count(t, q); got != want {
			t.Errorf("%s: %d, want %d", q, got, want)
		}
	}
}

// cancelAfter is a progress that cancels the pass after n batches, as a crash between two
// transactions would end it.
type cancelAfter struct {
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Start(int, string) {}
func (c *cancelAfter) Done()             {}
func (c *cancelAfter) Add(int) {
	if c.n--; c.n == 0 {
		c.cancel()
	}
}

// TestRetentionCutShortLeavesWholeOperations: a pass cancelled between batches has removed
// whole operations only (each left has all its rows, no row is left without its
// operation), and the next pass removes the rest and records itself.
func TestRetentionCutShortLeavesWholeOperations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	old := retainNow.Add(-600 * 24 * time.Hour)
	closed := old.Add(time.Minute)
	var ids []string
	for range 25 {
		ids = append(ids, seedHistory(t, f.DB, f.Tenant, ops.StatusSucceeded, ops.KindRefund, old, &closed))
	}
	full := rowsOf(t, f, ids[0])

	ctx, cancel := context.WithCancel(context.Background())
	r := newRetention(f, ops.NewManualClock(retainNow))
	r.Progress = &cancelAfter{n: 1, cancel: cancel}
	rep, err := r.RunOnce(ctx, false)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cut pass: %v, want context.Canceled", err)
	}
	if rep.Operations != 10 {
		t.Fatalf("cut pass removed %d operations, want one batch of 10", rep.Operations)
	}
	left := 0
	for _, id := range ids {
		got := rowsOf(t, f, id)
		if got["operations"] == 0 {
			if fmt.Sprint(got) != fmt.Sprint(rowsOf(t, f, uuid.NewString())) {
				t.Errorf("removed operation %s left rows behind: %v", id, got)
			}
			continue
		}
		left++
		if fmt.Sprint(got) != fmt.Sprint(full) {
			t.Errorf("operation %s half removed: %v, want %v", id, got, full)
		}
	}
	if left != 15 || f.Count(t, `SELECT count(*) FROM audit_log WHERE entity = 'retention'`) != 0 {
		t.Fatalf("%d operations left after the cut pass, want 15, and no pass recorded", left)
	}

	rep, err = newRetention(f, ops.NewManualClock(retainNow)).RunOnce(context.Background(), false)
	if err != nil || rep.Operations != 15 {
		t.Fatalf("next pass: removed %d, %v; want 15", rep.Operations, err)
	}
	if n := f.Count(t, `SELECT count(*) FROM operations`) + f.Count(t, `SELECT count(*) FROM attempts`) +
		f.Count(t, `SELECT count(*) FROM client_requests`); n != 0 {
		t.Errorf("%d rows left after the next pass", n)
	}
	if n := f.Count(t, `SELECT count(*) FROM audit_log WHERE entity = 'retention'`); n != 1 {
		t.Errorf("%d retention audit rows, want 1", n)
	}
}

// TestMonthlyPartitions: after migrate the append-only tables are partitioned by month, with
// this month and the next two ready and a default; rows land in their month, a row beyond
// every month waits in the default until its month is created, and then moves into it.
func TestMonthlyPartitions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().UTC()
	month := func(t time.Time, m int) string {
		return time.Date(t.Year(), t.Month()+time.Month(m), 1, 0, 0, 0, 0, time.UTC).Format("2006_01")
	}
	for _, table := range []string{"client_requests", "attempts", "audit_log"} {
		var kind string
		if err := f.DB.Pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE relname = $1`, table).Scan(&kind); err != nil || kind != "p" {
			t.Fatalf("%s: relkind %q, %v; want a partitioned table", table, kind, err)
		}
		for _, part := range []string{month(now, 0), month(now, 1), month(now, 2), "default"} {
			if f.Count(t, `SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
				WHERE i.inhparent = $1::regclass AND c.relname = $2`, table, table+"_"+part) != 1 {
				t.Errorf("%s has no partition %s", table, part)
			}
		}
	}
	// The ledger writes through the parents; rows land in their month.
	next := time.Date(now.Year(), now.Month()+1, 3, 0, 0, 0, 0, time.UTC)
	f.Clock.Set(next)
	o := f.ToUnknown(t, "ord_part")
	for table, col := range map[string]string{"client_requests": "operation_id", "attempts": "operation_id"} {
		if got, want := pgtest.PartitionOf(t, f.DB, table, col+" = $1", o.ID), table+"_"+month(next, 0); got != want {
			t.Errorf("%s row of %s in %s, want %s", table, next, got, want)
		}
	}
	// The timeout's finish is audited on its attempt; a person's close is an audit row.
	if _, err := f.DB.Transition(ctx, ops.TransitionParams{ID: o.ID, Version: o.Version, From: o.Status, To: ops.StatusFailed,
		Now: next, Actor: "ann@example.com", Action: "close", Reason: "checked"}); err != nil {
		t.Fatal(err)
	}
	if got, want := pgtest.PartitionOf(t, f.DB, "audit_log", "entity_id = $1", o.ID), "audit_log_"+month(next, 0); got != want {
		t.Errorf("audit row of %s in %s, want %s", next, got, want)
	}
	// Beyond every month: the default, until the month is created.
	far := time.Date(now.Year()+3, now.Month(), 10, 0, 0, 0, 0, time.UTC)
	f.Clock.Set(far)
	o2 := f.ToUnknown(t, "ord_far")
	if got := pgtest.PartitionOf(t, f.DB, "attempts", "operation_id = $1", o2.ID); got != "attempts_default" {
		t.Fatalf("attempt of %s in %s, want attempts_default", far, got)
	}
	n, err := f.retain.EnsurePartitions(ctx, ops.Lease{}, far, retain.MonthsAhead)
	if err != nil || n != 9 {
		t.Fatalf("EnsurePartitions at %s: %d, %v; want 9 (3 months of 3 tables)", far, n, err)
	}
	if got, want := pgtest.PartitionOf(t, f.DB, "attempts", "operation_id = $1", o2.ID), "attempts_"+month(far, 0); got != want {
		t.Errorf("after creating its month, the attempt is in %s, want %s", got, want)
	}
	if n, err := f.retain.EnsurePartitions(ctx, ops.Lease{}, far, retain.MonthsAhead); err != nil || n != 0 {
		t.Errorf("EnsurePartitions again: %d, %v; want 0", n, err)
	}
}

// TestRetentionDropsEmptiedMonths: a month whose rows all belonged to removed operations is
// dropped once the retention has removed them; a month holding a row of an open operation
// stays, and so does that row.
func TestRetentionDropsEmptiedMonths(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	gone := time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)
	open := time.Date(2025, 4, 10, 0, 0, 0, 0, time.UTC)
	if _, err := f.DB.Pool.Exec(ctx, `SELECT settle_month_partitions($1, $2)`, gone, open); err != nil {
		t.Fatal(err)
	}
	closed := gone.Add(time.Hour)
	seedHistory(t, f.DB, f.Tenant, ops.StatusSucceeded, ops.KindRefund, gone, &closed)
	keep := seedHistory(t, f.DB, f.Tenant, ops.StatusUnknown, ops.KindRefund, open, nil)
	if got := pgtest.PartitionOf(t, f.DB, "attempts", "started_at = $1", gone); got != "attempts_2025_03" {
		t.Fatalf("seeded attempt in %s, want attempts_2025_03", got)
	}

	rep, err := newRetention(f, ops.NewManualClock(retainNow)).RunOnce(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "attempts_2025_03 audit_log_2025_03 client_requests_2025_03"
	if got := strings.Join(rep.PartitionsDropped, " "); got != want {
		t.Fatalf("dropped %q, want %q", got, want)
	}
	for _, table := range []string{"attempts_2025_04", "audit_log_2025_04", "client_requests_2025_04"} {
		if f.Count(t, `SELECT count(*) FROM pg_class WHERE relname = $1`, table) != 1 {
			t.Errorf("%s was dropped; it holds rows of an open operation", table)
		}
	}
	if got := rowsOf(t, f, keep); got["attempts"] != 1 || got["client_requests"] != 2 || got["audit_log"] != 2 {
		t.Errorf("open operation's rows after the pass: %v", got)
	}
}

// TestAttemptNumbersStayUniqueWithoutTheIndex: attempts is partitioned, so UNIQUE
// (operation_id, n) could no longer be enforced across months; the number still cannot
// repeat, because it comes from the compare-and-set on the operation's row. Racing
// BeginAttempt from one version, one wins, and the numbers stay distinct.
func TestAttemptNumbersStayUniqueWithoutTheIndex(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if n := f.Count(t, `SELECT count(*) FROM pg_class WHERE relname = 'attempts' AND relkind = 'p'`); n != 1 {
		t.Fatal("attempts is not partitioned")
	}
	o, err := f.DB.Open(ctx, ops.OpenParams{Op: &ops.Operation{ID: uuid.NewString(), TenantID: f.Tenant, Kind: ops.KindRefund,
		Provider: "stripe", IntentKey: "race", ProviderKey: uuid.NewString(), Fingerprint: "fp", Retention: 24 * time.Hour},
		Now: t0, Claim: "w1", LeaseUntil: t0.Add(time.Minute), Actor: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := f.DB.BeginAttempt(ctx, ops.BeginParams{ID: o.Op.ID, Version: o.Op.Version, Owner: "w1", Now: t0, MaxAttempts: 6})
			if err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d BeginAttempt won from one version, want 1", won)
	}
	if n := f.Count(t, `SELECT count(*) FROM (SELECT n FROM attempts WHERE operation_id = $1 GROUP BY n HAVING count(*) > 1) d`, o.Op.ID); n != 0 {
		t.Errorf("%d attempt numbers repeat", n)
	}
	if n := f.Count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1`, o.Op.ID); n != 2 {
		t.Errorf("%d attempts, want 2 (the first and the winner's)", n)
	}
}

// TestRetentionRunsOnOneReplicaAtATime: while another replica holds the retention's role, a
// pass does nothing and says so; once it is free, the pass removes what is due.
func TestRetentionRunsOnOneReplicaAtATime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old := retainNow.Add(-500 * 24 * time.Hour)
	closed := old.Add(time.Minute)
	seedHistory(t, f.DB, f.Tenant, ops.StatusSucceeded, ops.KindRefund, old, &closed)
	other, held, err := f.DB.TakeLease(ctx, retain.Role, "retention:other", retainNow, retainNow.Add(time.Minute))
	if err != nil || !held {
		t.Fatal(held, err)
	}
	clock := ops.NewManualClock(retainNow)
	r := newRetention(f, clock)
	r.Role = ops.NewRole(f.DB, clock, slog.New(slog.DiscardHandler), retain.Role, "retention:test", 30*time.Second)
	rep, err := r.RunOnce(ctx, false)
	if err != nil || !rep.Skipped || rep.Operations != 0 || f.Count(t, `SELECT count(*) FROM operations`) != 1 {
		t.Fatalf("pass while another holds the role: %+v %v; want skipped, nothing removed", rep, err)
	}
	if err := f.DB.ReleaseLease(ctx, other); err != nil {
		t.Fatal(err)
	}
	if rep, err := r.RunOnce(ctx, false); err != nil || rep.Skipped || rep.Operations != 1 {
		t.Fatalf("pass once the role is free: %+v %v", rep, err)
	}
}

// TestRetentionEmptiesTheInboxOfOldEvents: a receiver's inbox of applied events is kept as
// long as a redelivery could come, and no longer than SETTLE_RETENTION.
func TestRetentionEmptiesTheInboxOfOldEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old, recent := retainNow.Add(-401*24*time.Hour), retainNow.Add(-24*time.Hour)
	for i := range 25 {
		at := old
		if i%5 == 0 {
			at = recent
		}
		if _, err := f.DB.Pool.Exec(ctx, `INSERT INTO consumed_events (consumer, event_id, topic, payload, applied_at)
VALUES ('jobs-webhook', $1, 'job.published', '{"result":"a summary"}', $2)`, fmt.Sprintf("evt_%02d", i), at); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := newRetention(f, ops.NewManualClock(retainNow)).RunOnce(ctx, false)
	if err != nil || rep.ConsumedEvents != 20 {
		t.Fatalf("pass: %+v %v; want the 20 old inbox rows removed", rep, err)
	}
	if n := f.Count(t, `SELECT count(*) FROM consumed_events WHERE applied_at = $1`, recent); n != 5 {
		t.Fatalf("%d recent inbox rows left, want 5", n)
	}
	if n := f.Count(t, `SELECT count(*) FROM consumed_events`); n != 5 {
		t.Fatalf("%d inbox rows left, want 5", n)
	}
}
