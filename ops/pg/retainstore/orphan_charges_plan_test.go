package retainstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/retainstore"
)

// TestOldOrphanChargesAreDeletedThroughTheOrphansIndex: a provider charge has no index on its
// id (a success's charge would take an entry in it that no reader uses; its primary key is
// the provider's (provider, charge_ref), migration 00077), so the retention
// finds the orphans it deletes, and deletes them, through provider_charges_orphan_idx alone:
// its batch and its dry run's count never scan every charge, which are mostly those of
// operations.
func TestOldOrphanChargesAreDeletedThroughTheOrphansIndex(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	args := pgx.NamedArgs{"cutoff": t0.Add(-24 * time.Hour), "batch": 100}
	for _, dry := range []bool{false, true} {
		q := retainstore.OrphanStepSQL("provider_charges", dry)
		plan := pgtest.PlanWithoutSeqScan(t, f.DB, q, args)
		if n := strings.Count(plan, "provider_charges_orphan_idx"); n != 2 {
			t.Errorf("dry %v: the orphans are read through provider_charges_orphan_idx %d times, want 2 (the pick and the delete):\n%s", dry, n, plan)
		}
		if strings.Contains(plan, "provider_charges_pkey") {
			t.Errorf("dry %v: the orphans are addressed through the provider's key:\n%s", dry, plan)
		}
	}
}
