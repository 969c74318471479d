package main

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
)

// 'settle mcp --stdio' reads SETTLE_OPERATION_LEASE and works its clock-skew limit out from
// it, so the leases its refunds take must be that long too: a stdio refund leased for the
// default 30 s while every replica and the skew limit count on a longer lease would be taken
// over and sent again by a reaper while its Stripe call still runs (ops rule 11).
func TestMCPStdioLeasesOperationsForTheConfiguredLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lease = 4 * time.Minute
	a := startStdioAgentWith(t, func(run *stdioRun, fk *fake.Stripe) {
		run.Config.OperationLease = lease
		run.Config.Stripe.Timeout, run.Config.Stripe.Deadline = 20*time.Second, 30*time.Second
		// The refund's call is held long enough to read the lease it runs under.
		fk.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultSlow, Delay: 3 * time.Second})
	})
	called := make(chan error, 1)
	go func() {
		args := map[string]any{"order_id": "4417", "amount_cents": 3800, "currency": "usd", "payment_intent": "pi_4417"}
		_, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "issue_refund", Arguments: args})
		called <- err
	}()
	left := leaseLeftInFlight(t, a.db, 10*time.Second)
	if left < lease-time.Minute || left > lease+time.Minute {
		t.Errorf("a stdio refund in flight holds its lease for another %s, want about SETTLE_OPERATION_LEASE=%s", left, lease)
	}
	if err := <-called; err != nil {
		t.Fatalf("issue_refund: %v", err)
	}
}

// leaseLeftInFlight waits up to wait for an operation in flight and returns how long its
// lease has left by the database's clock.
func leaseLeftInFlight(t *testing.T, db *pg.DB, wait time.Duration) time.Duration {
	t.Helper()
	for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var secs float64
		err := db.Pool.QueryRow(context.Background(), `SELECT EXTRACT(EPOCH FROM lease_until - now())::float8 FROM operations
			WHERE status = 'in_progress' AND lease_until IS NOT NULL`).Scan(&secs)
		if err == nil {
			return time.Duration(secs * float64(time.Second))
		}
	}
	t.Fatalf("no operation in flight within %s", wait)
	return 0
}
