// Package deskstore holds the desk's statements on the operations and on its own tables:
// the queues (operations and queue_counts), bulk lookups (bulk_lookups), follow-ups
// (follow_ups), saved views (saved_views), the audit log (audit_log, with the entries
// that operations and attempts hold: openings and attempts' finishes) and one operation's
// timeline. It implements the stores of package desk on the pool of ops/pg, which keeps the
// follow-ups' notifications, since the close that settles a follow-up writes them.
package deskstore

import (
	"context"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

var (
	_ desk.Queues         = (*Store)(nil)
	_ desk.BulkStore      = (*Store)(nil)
	_ desk.FollowUpStore  = (*Store)(nil)
	_ desk.SavedViewStore = (*Store)(nil)
	_ desk.AuditWriter    = (*Store)(nil)
)

// Store is the desk's store on db's pool.
type Store struct{ db *pg.DB }

// New returns the desk's store on db.
func New(db *pg.DB) *Store { return &Store{db: db} }

// MadeCharges implements ops.MadeCharges as the ledger's store does, for the sentences the
// desk's pages show.
func (s *Store) MadeCharges(ctx context.Context, opID string) ([]ops.ProviderRecord, error) {
	return s.db.MadeCharges(ctx, opID)
}

// Get returns one operation as the ledger's store reads it, so that the store serves an
// operation's page (its row and its Timeline) alone.
func (s *Store) Get(ctx context.Context, id string) (*ops.Operation, error) {
	return s.db.Get(ctx, id)
}
