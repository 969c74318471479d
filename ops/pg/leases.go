package pg

import (
	"context"
	"time"

	"github.com/settle-dev/settle/ops/recon"
)

var _ recon.LeaseRenewer = (*DB)(nil)

// RenewLease implements recon.LeaseRenewer: a reconciler's run keeps its lease row for as
// long as it lasts, a short lease at a time, so a replica that dies mid-run frees it soon.
// The row is matched on its owner, a token per run, so a run that lost its lease never
// extends its successor's.
func (db *DB) RenewLease(ctx context.Context, name, owner string, until time.Time) (bool, error) {
	tag, err := db.Pool.Exec(ctx, `UPDATE recon_leases SET lease_until = $3
WHERE name = $1 AND owner = $2 AND lease_until IS NOT NULL`, name, owner, until)
	if err != nil {
		return false, interpret(err, "renew lease")
	}
	return tag.RowsAffected() == 1, nil
}
