package pg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// Statements are sent in a mode a pooler in transaction mode allows, unless the connection
// string chooses one.
func TestOpenChoosesAPoolerSafeExecMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(pgtest.NewDatabase(t))
	for _, c := range []struct {
		url  string
		want pgx.QueryExecMode
	}{
		{url, pgx.QueryExecModeCacheDescribe},
		{url + "&default_query_exec_mode=cache_statement", pgx.QueryExecModeCacheStatement},
		{url + "&default_query_exec_mode=exec", pgx.QueryExecModeExec},
	} {
		db, err := pg.Open(ctx, c.url)
		if err != nil {
			t.Fatal(err)
		}
		got := db.Pool.Config().ConnConfig.DefaultQueryExecMode
		if err := db.Ping(ctx); err != nil || got != c.want {
			t.Errorf("%s: mode %v (%v), want %v", c.url, got, err, c.want)
		}
		db.Close()
	}
}

// On a direct connection the ledger's two statements of a lifecycle run on their generic
// plans (planned once per connection, see ledgerWritePool), while the main pool leaves the
// choice to Postgres, so the dashboard's queries keep plans made for their parameters.
func TestLedgerWritesRunOnGenericPlans(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for i := range 8 { // past the five custom plans Postgres tries before it may choose
		o, err := f.seed().Open(ctx, f.refund(fmt.Sprintf("plan-%d", i), 1200), fmt.Sprintf("req-%d", i), "w1")
		if err != nil {
			t.Fatal(err)
		}
		op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeOK,
			Result: &ops.Result{ProviderRef: fmt.Sprintf("re_plan_%d", i)}})
		if err != nil || op.Status != ops.StatusSucceeded {
			t.Fatalf("lifecycle %d: %v", i, err)
		}
	}
	w := pg.LedgerWrites(f.db)
	if w == nil {
		t.Fatal("no pool of its own for the ledger's writes on a direct connection")
	}
	var generic, custom int64
	for _, c := range w.AcquireAllIdle(ctx) {
		var g, cu int64
		err := c.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
			FROM pg_prepared_statements WHERE statement LIKE '%INSERT INTO operations AS o%'
				OR statement LIKE '%UPDATE operations o SET status = $1, phase = $2, version = version + 1,%'`).Scan(&g, &cu)
		c.Release()
		if err != nil {
			t.Fatal(err)
		}
		generic, custom = generic+g, custom+cu
	}
	if generic < 16 || custom != 0 {
		t.Errorf("ledger statements: %d generic plans, %d custom, want at least 16 and none", generic, custom)
	}
	var mode string
	if err := f.db.Pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil || mode != "auto" {
		t.Errorf("main pool's plan_cache_mode %q (%v), want auto", mode, err)
	}
}

// A close that answers a client request finds the request in its month's partition although
// the close runs a month later (the update is bounded by the operation's creation so that its
// generic plan touches only the months since), and a close with no request to answer leaves
// every request as it was.
func TestCloseAnswersARequestOfAnEarlierMonth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o := f.openAMonthAgo(t, "month-1")
	op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeOK,
		Result: &ops.Result{ProviderRef: "re_month_1"}, ClientRequestID: o.ClientRequestID, Answer: ops.AnswerRetried})
	if err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("close: %v", err)
	}
	var answer, part string
	if err := f.db.Pool.QueryRow(ctx, `SELECT answer, tableoid::regclass::text FROM client_requests WHERE id = $1`,
		o.ClientRequestID).Scan(&answer, &part); err != nil {
		t.Fatal(err)
	}
	if answer != string(ops.AnswerRetried) || part != "client_requests_2026_11" {
		t.Fatalf("request in %s answered %q, want %q in client_requests_2026_11", part, answer, ops.AnswerRetried)
	}

	o2, err := f.seed().Open(ctx, f.refund("month-2", 2500), "req-month-2", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.seed().Finish(ctx, o2.Op, o2.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeOK,
		Result: &ops.Result{ProviderRef: "re_month_2"}, ClientRequestID: o2.ClientRequestID}); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE answer IS DISTINCT FROM 'new'`); n != 1 {
		t.Fatalf("%d requests answered other than new, want only the first", n)
	}
}

// A request stamped by a replica whose clock runs seconds behind the one that created the
// operation is still answered by the close: the bound on its months allows a day.
func TestCloseAnswersARequestStampedByASlowerClock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o, err := f.seed().Open(ctx, f.refund("skew-1", 2500), "req-skew-1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Pool.Exec(ctx, `UPDATE client_requests SET received_at = received_at - interval '10 seconds'
		WHERE id = $1`, o.ClientRequestID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeOK,
		Result: &ops.Result{ProviderRef: "re_skew_1"}, ClientRequestID: o.ClientRequestID, Answer: ops.AnswerRetried}); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE id = $1 AND answer = 'retried'`, o.ClientRequestID); n != 1 {
		t.Fatal("the request stamped 10 s before the operation's creation was not answered")
	}
}

// A statement mode named in the connection string may be meant for a pooler, which refuses
// unknown startup parameters: such a connection gets no pool of generic plans.
func TestNamedExecModeGetsNoGenericPlanPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(pgtest.NewDatabase(t))
	db, err := pg.Open(ctx, url+"&default_query_exec_mode=cache_statement", pg.PreparedWhenDirect())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if pg.LedgerWrites(db) != nil {
		t.Fatal("a pool with plan_cache_mode for a connection string that names its statement mode")
	}
}

// A client request answered long after it was received (past the day the first try looks
// in) is still answered, from its own month.
func TestAnswerFindsARequestOfAnEarlierMonth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o := f.openAMonthAgo(t, "late-answer")
	if err := f.ledger.Answer(ctx, o.ClientRequestID, ops.AnswerReplayed); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE id = $1 AND answer = 'replayed'`, o.ClientRequestID); n != 1 {
		t.Fatalf("the request of an earlier month was not answered")
	}
	if err := f.ledger.Answer(ctx, 1<<40, ops.AnswerReplayed); ops.ErrorCode(err) != ops.ENOTFOUND {
		t.Fatalf("answering a request that does not exist: %v, want not found", err)
	}
}

// openAMonthAgo opens a refund for order with the client request in this month's partition,
// then moves the clock 40 days on, into the next month's.
func (f *fixture) openAMonthAgo(t *testing.T, order string) ops.Admission {
	t.Helper()
	ctx := context.Background()
	if _, err := f.db.Pool.Exec(ctx, `SELECT settle_month_partitions($1, $2)`, t0, t0.AddDate(0, 2, 0)); err != nil {
		t.Fatal(err)
	}
	o, err := f.seed().Open(ctx, f.refund(order, 2500), "req-"+order, "w1")
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(40 * 24 * time.Hour)
	return o
}
