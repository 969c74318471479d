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
	_, url := pgtest.NewWithURL(t)
	var read atomic.Int64
	count := func(c *pgxpool.Config) {
		dial := c.ConnConfig.DialFunc
		c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: conn, read: &read}, nil
		}
	}
	db, tenant := openWithTenant(ctx, t, url, pg.PreparedWhenDirect(), count)
	ledger := ops.NewLedger(db, ops.SystemClock{})
	ledger.Register(refund.Kind())
	a, err := ledger.Admit(ctx, ops.Intent{TenantID: tenant, Kind: ops.KindRefund, Provider: "stripe", IntentKey: "ord-1:100:usd",
		Fingerprint: "fp", OrderRef: "ord-1", AmountCents: 100, Currency: "usd", Retention: 24 * time.Hour,
		RequestRef: "req-1", Owner: "w1"})
	if err != nil || a.Attempt == nil {
		t.Fatalf("admit: %+v %v", a, err)
	}
	const size = 200_000
	body := []byte(`{"id": "re_1", "pad": "` + strings.Repeat("x", size) + `"}`)
	send := ops.SenderFunc(func(context.Context, *ops.Operation, *ops.Attempt) ops.AttemptResult {
		return ops.AttemptResult{Outcome: ops.OutcomeOK, Result: &ops.Result{ProviderRef: "re_1", Body: body}}
	})
	before := read.Load()
	out, err := ledger.Run(ctx, a.Op, send, ops.RunSpec{Owner: "w1", First: a.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	n := read.Load() - before
	t.Logf("closing with a %d-byte answer read %d bytes from the server", len(body), n)
	if n >= size {
		t.Errorf("closing with a %d-byte answer read %d bytes from the server, want the answer not read back", len(body), n)
	}
	stored, err := db.Get(ctx, out.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(out.Result, &got); err != nil {
		t.Fatalf("the closed operation's result %.40q: %v", out.Result, err)
	}
	_ = json.Unmarshal(stored.Result, &want)
	if out.Status != ops.StatusSucceeded || !reflect.DeepEqual(got, want) {
		t.Errorf("the close returned status %s and a result unlike the stored one", out.Status)
	}
	out.Result, stored.Result = nil, nil
	if !reflect.DeepEqual(out, stored) {
		t.Errorf("the close returned\n%+v\nthe stored operation is\n%+v", out, stored)
	}
}
