package pg_test

import (
	"context"
	"encoding/json"
	"net"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

// refundClosed admits a refund of order with request, runs it to the provider's answer and
// returns the operation the close returned and the bytes the server sent meanwhile.
func refundClosed(ctx context.Context, t *testing.T, db *pg.DB, tenant int64, read *atomic.Int64, order string, request, answer json.RawMessage) (*ops.Operation, int64) {
	t.Helper()
	ledger := ops.NewLedger(db, ops.SystemClock{})
	ledger.Register(refund.Kind())
	a, err := ledger.Admit(ctx, ops.Intent{TenantID: tenant, Kind: ops.KindRefund, Provider: "stripe", IntentKey: order + ":100:usd",
		Fingerprint: "fp", OrderRef: order, AmountCents: 100, Currency: "usd", Retention: 24 * time.Hour,
		Request: request, RequestRef: "req-" + order, Owner: "w1"})
	if err != nil || a.Attempt == nil {
		t.Fatalf("admit: %+v %v", a, err)
	}
	send := ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
		return ops.AttemptResult{Outcome: ops.OutcomeOK, Result: &ops.Result{ProviderRef: "re_1", Body: answer}}
	})
	before := read.Load()
	out, err := ledger.Run(ctx, a.Op, send, ops.RunSpec{Owner: "w1", First: a.Attempt})
	if err != nil || out.Request == nil && request != nil {
		t.Fatalf("run: %+v %v", out, err)
	}
	return out, read.Load() - before
}

// openCounting opens a database whose connections count the bytes the server sends them.
func openCounting(ctx context.Context, t *testing.T) (*pg.DB, int64, *atomic.Int64) {
	t.Helper()
	_, url := pgtest.NewWithURL(t)
	read := new(atomic.Int64)
	count := func(c *pgxpool.Config) {
		dial := c.ConnConfig.DialFunc
		c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: conn, read: read}, nil
		}
	}
	db, tenant := openWithTenant(ctx, t, url, pg.PreparedWhenDirect(), count)
	return db, tenant, read
}

// countingConn counts the bytes the server sends.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

// The close that records a provider's answer does not read that answer back from the
// server: the caller holds it already, and a large answer (an embedding's vectors) would
// cross the wire a second time and cost the server its encoding. The operation it returns
// still carries the answer, as the stored row does (ops rule 6: the close is one
// compare-and-set whose result the caller goes on with).
func TestCloseDoesNotReadTheAnswerBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, tenant, read := openCounting(ctx, t)
	const size = 200_000
	body := []byte(`{"id": "re_1", "pad": "` + strings.Repeat("x", size) + `"}`)
	out, n := refundClosed(ctx, t, db, tenant, read, "ord-1", nil, body)
	t.Logf("closing with a %d-byte answer read %d bytes from the server", len(body), n)
	if n >= size {
		t.Errorf("closing with a %d-byte answer read %d bytes from the server, want the answer not read back", len(body), n)
	}
	succeededAsStored(ctx, t, db, out, "result", func(o *ops.Operation) *json.RawMessage { return &o.Result })
}

// The close does not read the operation's request back either: the caller holds it (a
// request never changes once its operation exists), and an LLM call's prompt is often the
// largest thing on its row, so every close of a long prompt sent it back across the wire,
// encoded again by the server. The operation the close returns still carries the request
// (ops rule 6: the caller goes on with the operation the compare-and-set returned; a retry
// sends that request again).
func TestCloseDoesNotReadTheRequestBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, tenant, read := openCounting(ctx, t)
	const size = 200_000
	request := json.RawMessage(`{"note": "` + strings.Repeat("x", size) + `", "order": "ord-1"}`)
	out, n := refundClosed(ctx, t, db, tenant, read, "ord-1", request, json.RawMessage(`{"id": "re_1"}`))
	t.Logf("closing an operation with a %d-byte request read %d bytes from the server", len(request), n)
	if n >= size {
		t.Errorf("closing an operation with a %d-byte request read %d bytes from the server, want the request not read back", len(request), n)
	}
	succeededAsStored(ctx, t, db, out, "request", func(o *ops.Operation) *json.RawMessage { return &o.Request })
}

// A request the purge removed after the caller read its operation is not handed back by the
// change that follows: the operation it returns says what the row holds, no request and the
// time of the purge, not the caller's copy.
func TestAChangeAfterThePurgeReturnsNoRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, tenant, read := openCounting(ctx, t)
	held, _ := refundClosed(ctx, t, db, tenant, read, "ord-2", json.RawMessage(`{"order": "ord-2"}`), json.RawMessage(`{"id": "re_1"}`))
	if _, err := db.Pool.Exec(ctx, `UPDATE operations SET request = NULL, result = NULL, stream_events = NULL, purged_at = now() WHERE id = $1`, held.ID); err != nil {
		t.Fatal(err)
	}
	out, err := db.Transition(ctx, ops.TransitionParams{ID: held.ID, Version: held.Version, From: ops.StatusSucceeded, To: ops.StatusFailed,
		Now: time.Now(), Actor: "stripe", Action: "fail_after_success", Reason: "the provider's re_2 is failed after it succeeded",
		Request: held.Request})
	if err != nil {
		t.Fatal(err)
	}
	if out.Request != nil || out.PurgedAt == nil {
		t.Errorf("a change after the purge returned request %.40q and purged_at %v, want no request and the purge's time", out.Request, out.PurgedAt)
	}
}

// succeededAsStored checks that out, as a close returned it, succeeded and matches the stored
// operation field for field, the body field picks (which the database keeps as jsonb, so
// its spelling may differ) compared as a JSON value.
func succeededAsStored(ctx context.Context, t *testing.T, db *pg.DB, out *ops.Operation, name string, field func(*ops.Operation) *json.RawMessage) {
	t.Helper()
	stored, err := db.Get(ctx, out.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(*field(out), &got); err != nil {
		t.Fatalf("the closed operation's %s %.40q: %v", name, *field(out), err)
	}
	_ = json.Unmarshal(*field(stored), &want)
	if out.Status != ops.StatusSucceeded || !reflect.DeepEqual(got, want) {
		t.Errorf("the close returned status %s and a %s unlike the stored one", out.Status, name)
	}
	*field(out), *field(stored) = nil, nil
	if !reflect.DeepEqual(out, stored) {
		t.Errorf("the close returned\n%+v\nthe stored operation is\n%+v", out, stored)
	}
}
