package jobstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestAClaimBesideManyOverlappingClaimsTakesTheTenantsNextJob holds more of a lone tenant's
// oldest jobs than a claim looks at ahead of the ones it takes, the way that many claims
// running at the same moment do: the claim still takes the tenant's next free job, for a
// batch of one or of several, instead of coming back empty and leaving its worker idle
// until the next poll while the queue waits (docs/api.md, "Workers claim jobs"; no numbered
// rule of package ops covers the order of claims).
func TestAClaimBesideManyOverlappingClaimsTakesTheTenantsNextJob(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{1, 3} {
		t.Run(fmt.Sprintf("batch of %d", batch), func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			js := jobstore.New(db)
			ctx := context.Background()
			ids := queueJobs(t, db, "solo", 40, t0)
			held := 20
			tx, err := db.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `SELECT id FROM jobs WHERE id = ANY($1::uuid[]) FOR UPDATE`, ids[:held]); err != nil {
				t.Fatal(err)
			}
			now := t0.Add(time.Hour)
			got, err := js.ClaimJobs(ctx, "w", now, now.Add(time.Hour), batch)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != batch {
				t.Fatalf("beside %d held jobs a claim of %d took %d of the %d free ones", held, batch, len(got), len(ids)-held)
			}
			for i, j := range got {
				if want := ids[held+i]; j.ID != want {
					t.Errorf("job %d of the claim is %s, want the tenant's next free one %s", i+1, j.ID, want)
				}
			}
		})
	}
}
