package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

// busyNeighbours is how many other attempts begin within the same second as the one a test
// closes: a second of a gateway at 500 calls per second.
const busyNeighbours = 500

// Closing an attempt records its end on its own row (ops rule 8) and finds that row by its
// key, reading a handful of index entries however many other attempts began in the same
// second. It once found the row through a window of a second either way of its start, which
// the server could scan through the start-time index: every close read every attempt of two
// seconds, a cost that grew with the traffic.
func TestClosingAnAttemptReadsItsOwnRowInABusySecond(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, ledger, tenant := busyLedger(ctx, t)
	a := admitRefund(ctx, t, ledger, tenant, "ord-1")
	other := admitRefund(ctx, t, ledger, tenant, "ord-2")
	// Other operations' attempts, begun within a quarter of a second of this one's start.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO attempts (operation_id, n, provider_key, owner, started_at)
		SELECT $1::uuid, 1 + g, 'pk-other', 'w2', $2::timestamptz + (g - $3 / 2) * interval '1 ms' / 2
		FROM generate_series(1, $3) g`, other.Op.ID, a.Attempt.StartedAt, busyNeighbours); err != nil {
		t.Fatal(err)
	}
	before := indexReads(ctx, t, db, "attempts")
	op, err := ledger.Run(ctx, a.Op, okRefund, ops.RunSpec{Owner: "w1", First: a.Attempt})
	if err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("run: %v %v", op, err)
	}
	if n := indexReads(ctx, t, db, "attempts") - before; n > 10 {
		t.Errorf("closing one attempt read %d index entries of attempts, with %d other attempts begun in the same second", n, busyNeighbours)
	}
	var outcome string
	if err := db.Pool.QueryRow(ctx, `SELECT outcome FROM attempts WHERE id = $1`, a.Attempt.ID).Scan(&outcome); err != nil || outcome != string(ops.OutcomeOK) {
		t.Errorf("the attempt's row holds outcome %q (%v), want ok", outcome, err)
	}
}

// busyLedger opens a ledger for refunds on a new database through one connection, whose
// statistics the test reads after telling the backend to send them, on generic plans as
// the ledger's writes run in production (one plan for every call, made without the
// parameters' values).
func busyLedger(ctx context.Context, t *testing.T) (*pg.DB, *ops.Ledger, int64) {
	t.Helper()
	_, url := pgtest.NewWithURL(t)
	db, tenant := openWithTenant(ctx, t, withParams(url, "pool_max_conns=1&plan_cache_mode=force_generic_plan"))
	ledger := ops.NewLedger(db, ops.SystemClock{})
	ledger.Register(refund.Kind())
	return db, ledger, tenant
}

func admitRefund(ctx context.Context, t *testing.T, ledger *ops.Ledger, tenant int64, order string) ops.Admission {
	t.Helper()
	a, err := ledger.Admit(ctx, ops.Intent{TenantID: tenant, Kind: ops.KindRefund, Provider: "stripe", IntentKey: order + ":100:usd",
		Fingerprint: "fp-" + order, OrderRef: order, AmountCents: 100, Currency: "usd", Retention: 24 * time.Hour,
		RequestRef: "req-" + order, Owner: "w1"})
	if err != nil || a.Attempt == nil {
		t.Fatalf("admit %s: %+v %v", order, a, err)
	}
	return a
}

var okRefund = ops.SenderFunc(func(_ context.Context, op *ops.Operation, _ *ops.Attempt) ops.AttemptResult {
	return ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200, ProviderRequestID: "req_" + op.ID,
		Result: &ops.Result{ProviderRef: "re_" + op.ID, ProviderRequestID: "req_" + op.ID, Body: []byte(`{"id":"re_1"}`)}}
})

// indexReads is the index entries the database's backends have read from the indexes of
// table and its partitions, after this connection's backend has sent its statistics.
func indexReads(ctx context.Context, t *testing.T, db *pg.DB, table string) int64 {
	t.Helper()
	if _, err := db.Pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := db.Pool.QueryRow(ctx, `SELECT coalesce(sum(idx_tup_read), 0)::bigint FROM pg_stat_user_indexes
		WHERE relname = $1 OR relname LIKE $1 || '\_%'`, table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Answering a client request, in the close of the attempt that answers it or on its own,
// records the answer on the request's row (ops rule 8) found by its key, reading a handful of
// index entries however many other requests came in the same day: both statements bound the
// request's arrival time by a day, so that the months of client_requests are pruned, and a
// generic plan may read through the arrival-time index instead of the key.
func TestAnsweringAClientRequestReadsItsOwnRowInABusyDay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, ledger, tenant := busyLedger(ctx, t)
	a := admitRefund(ctx, t, ledger, tenant, "ord-1")
	other := admitRefund(ctx, t, ledger, tenant, "ord-2")
	if _, err := db.Pool.Exec(ctx, `INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, received_at)
		SELECT $1, $2::uuid, 'refund', 'req-other-' || g, true, now() - g * interval '1 s'
		FROM generate_series(1, $3) g`, tenant, other.Op.ID, busyNeighbours); err != nil {
		t.Fatal(err)
	}
	answered := ops.SenderFunc(func(ctx context.Context, op *ops.Operation, at *ops.Attempt) ops.AttemptResult {
		r := okRefund(ctx, op, at)
		r.ClientRequestID, r.Answer = a.ClientRequestID, ops.AnswerRetried
		return r
	})
	before := indexReads(ctx, t, db, "client_requests")
	if op, err := ledger.Run(ctx, a.Op, answered, ops.RunSpec{Owner: "w1", First: a.Attempt}); err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("run: %v %v", op, err)
	}
	if n := indexReads(ctx, t, db, "client_requests") - before; n > 10 {
		t.Errorf("the close that answered one client request read %d index entries of client_requests, with %d other requests that day", n, busyNeighbours)
	}
	before = indexReads(ctx, t, db, "client_requests")
	if err := db.AnswerClientRequest(ctx, other.ClientRequestID, ops.AnswerConflict, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := indexReads(ctx, t, db, "client_requests") - before; n > 10 {
		t.Errorf("answering one client request read %d index entries of client_requests, with %d other requests that day", n, busyNeighbours)
	}
	var answers []string
	rows, _ := db.Pool.Query(ctx, `SELECT answer FROM client_requests WHERE id IN ($1, $2) ORDER BY id`, a.ClientRequestID, other.ClientRequestID)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		answers = append(answers, s)
	}
	if strings.Join(answers, ",") != "retried,conflict" {
		t.Errorf("the two requests hold the answers %v, want retried and conflict", answers)
	}
}
