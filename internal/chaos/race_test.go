package chaos

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestConcurrentDuplicatesOpenOneOperation sends three identical refund requests at once,
// with no fault anywhere, round after round: one intent must make one operation and one
// refund. It isolates what the chaos seeds found as double refunds: two requests that both
// saw no operation of the intent both open one when the first closes before the second's
// insert checks the open-intent index.
func TestConcurrentDuplicatesOpenOneOperation(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	var doubles []string
	for i := range 200 {
		s := &schedule{Seed: uint64(1_000_000 + i), Tenants: []tenantSpec{{Name: fmt.Sprintf("dup-%d", i)}},
			Intents: []intent{{Name: "R1", Kind: "refund", Order: "o1", Cents: 500, Payment: fmt.Sprintf("pi_dup%d", i), PaymentCents: 1000}}}
		r, err := start(ctx, db, s, laneStart.Add(-laneSpan*timeUnits(i)))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.send(ctx, send{Intent: 0, Variant: same}, "")
			}()
		}
		wg.Wait()
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM operations WHERE tenant_id = $1`, r.tenants[0].ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		refunds := len(r.stripe.Refunds())
		r.close()
		if n != 1 || refunds != 1 {
			doubles = append(doubles, fmt.Sprintf("round %d: %d operations, %d refunds", i, n, refunds))
		}
	}
	if len(doubles) > 0 {
		t.Errorf("three identical requests at once made more than one operation in %d of 200 rounds: %v", len(doubles), doubles)
	}
}
