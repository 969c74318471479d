package deskstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
)

// bulkFilter is a queue filter as bulk_lookups.filter keeps it.
type bulkFilter struct {
	Status    ops.Status    `json:"status"`
	TenantID  int64         `json:"tenant_id,omitempty"`
	Kind      ops.Kind      `json:"kind,omitempty"`
	Provider  string        `json:"provider,omitempty"`
	OlderThan time.Duration `json:"older_than,omitempty"`
	Now       time.Time     `json:"now"`
	Search    string        `json:"search,omitempty"`
}

const bulkCols = `id, actor, filter, filter_label, state, started_at, finished_at, coalesce(stopped_by, ''), total, done,
	closed, already_closed, need_person, reasons, samples, cursor_at, cursor_id::text, coalesce(lease_owner, ''), lease_until`

func scanBulk(row pgx.CollectableRow) (desk.BulkLookup, error) {
	var b desk.BulkLookup
	var filter, reasons, samples []byte
	var cursorAt *time.Time
	var cursorID *string
	err := row.Scan(&b.ID, &b.Actor, &filter, &b.FilterLabel, &b.State, &b.StartedAt, &b.FinishedAt, &b.StoppedBy, &b.Total,
		&b.Done, &b.Closed, &b.AlreadyClosed, &b.NeedPerson, &reasons, &samples, &cursorAt, &cursorID, &b.LeaseOwner, &b.LeaseUntil)
	if err != nil {
		return b, err
	}
	var f bulkFilter
	if err := errors.Join(json.Unmarshal(filter, &f), json.Unmarshal(reasons, &b.Reasons), json.Unmarshal(samples, &b.Samples)); err != nil {
		return b, fmt.Errorf("decode bulk lookup %d: %w", b.ID, err)
	}
	b.Filter = desk.QueueFilter{Status: f.Status, TenantID: f.TenantID, Kind: f.Kind, Provider: f.Provider,
		OlderThan: f.OlderThan, Now: f.Now, Search: f.Search}
	if cursorAt != nil && cursorID != nil {
		b.Cursor = &desk.QueueCursor{CreatedAt: *cursorAt, ID: *cursorID}
	}
	return b, nil
}

// StartBulk implements desk.BulkStore: the count of matching operations and the new row in
// one snapshot.
func (s *Store) StartBulk(ctx context.Context, b desk.BulkLookup) (desk.BulkLookup, error) {
	f := b.Filter
	filter, err := json.Marshal(bulkFilter{Status: f.Status, TenantID: f.TenantID, Kind: f.Kind, Provider: f.Provider,
		OlderThan: f.OlderThan, Now: f.Now, Search: f.Search})
	if err != nil {
		return b, fmt.Errorf("encode bulk filter: %w", err)
	}
	where, args := queueWhere(f, f.Now)
	args["status"], args["actor"], args["filter"], args["label"], args["now"] = string(f.Status), b.Actor, filter, b.FilterLabel, b.StartedAt
	rows, err := s.db.Pool.Query(ctx, `INSERT INTO bulk_lookups (actor, filter, filter_label, state, started_at, total)
SELECT @actor, @filter, @label, 'running', @now, count(*) FROM operations o
WHERE o.status = @status AND o.created_at <= @now AND `+where+`
RETURNING `+bulkCols, args)
	if err != nil {
		return b, pg.Interpret(err, "start bulk lookup")
	}
	out, err := pgx.CollectExactlyOneRow(rows, scanBulk)
	return out, pg.Interpret(err, "start bulk lookup")
}

// ClaimBulk implements desk.BulkStore.
func (s *Store) ClaimBulk(ctx context.Context, owner string, now, until time.Time) (*desk.BulkLookup, error) {
	rows, err := s.db.Pool.Query(ctx, `UPDATE bulk_lookups SET lease_owner = $1, lease_until = $3
WHERE id = (SELECT id FROM bulk_lookups WHERE state = 'running' AND (lease_until IS NULL OR lease_until < $2)
	ORDER BY started_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING `+bulkCols, owner, now, until)
	if err != nil {
		return nil, pg.Interpret(err, "claim bulk lookup")
	}
	b, err := pgx.CollectExactlyOneRow(rows, scanBulk)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, pg.Interpret(err, "claim bulk lookup")
	}
	return &b, nil
}

// SaveBulkProgress implements desk.BulkStore. The counts are saved even when someone stopped
// the run meanwhile: those lookups happened.
func (s *Store) SaveBulkProgress(ctx context.Context, b desk.BulkLookup, owner string, now, until time.Time, finished bool) (string, error) {
	reasons, err := json.Marshal(b.Reasons)
	if err != nil {
		return "", fmt.Errorf("encode bulk reasons: %w", err)
	}
	samples, err := json.Marshal(b.Samples)
	if err != nil {
		return "", fmt.Errorf("encode bulk samples: %w", err)
	}
	var at *time.Time
	var id *string
	if b.Cursor != nil {
		at, id = &b.Cursor.CreatedAt, &b.Cursor.ID
	}
	var state string
	err = s.db.Pool.QueryRow(ctx, `UPDATE bulk_lookups SET done = @done, closed = @closed, already_closed = @already,
	need_person = @need, reasons = @reasons, samples = @samples, cursor_at = @at, cursor_id = @cid::uuid,
	lease_until = CASE WHEN @finished::boolean THEN NULL ELSE @until::timestamptz END,
	lease_owner = CASE WHEN @finished::boolean THEN NULL ELSE lease_owner END,
	state = CASE WHEN @finished::boolean AND state = 'running' THEN 'done' ELSE state END,
	finished_at = CASE WHEN @finished::boolean AND state = 'running' THEN @now::timestamptz ELSE finished_at END
WHERE id = @id AND lease_owner = @owner
RETURNING state`, pgx.NamedArgs{"done": b.Done, "closed": b.Closed, "already": b.AlreadyClosed, "need": b.NeedPerson,
		"reasons": reasons, "samples": samples, "at": at, "cid": id, "now": now, "until": until, "finished": finished, "id": b.ID,
		"owner": owner}).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", desk.ErrBulkLeaseLost
	}
	return state, pg.Interpret(err, "save bulk lookup")
}

// StopBulk implements desk.BulkStore.
func (s *Store) StopBulk(ctx context.Context, id int64, actor string, now time.Time) (desk.BulkLookup, error) {
	rows, err := s.db.Pool.Query(ctx, `UPDATE bulk_lookups SET state = 'stopped', stopped_by = $2, finished_at = $3
WHERE id = $1 AND state = 'running' RETURNING `+bulkCols, id, actor, now)
	if err != nil {
		return desk.BulkLookup{}, pg.Interpret(err, "stop bulk lookup")
	}
	b, err := pgx.CollectExactlyOneRow(rows, scanBulk)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := s.GetBulk(ctx, id)
		if gerr != nil {
			return desk.BulkLookup{}, gerr
		}
		return cur, ops.Errorf(ops.ECONFLICT, "Bulk lookup %d is no longer running: it is %s.", id, cur.State)
	}
	return b, pg.Interpret(err, "stop bulk lookup")
}

// GetBulk implements desk.BulkStore.
func (s *Store) GetBulk(ctx context.Context, id int64) (desk.BulkLookup, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT `+bulkCols+` FROM bulk_lookups WHERE id = $1`, id)
	if err != nil {
		return desk.BulkLookup{}, pg.Interpret(err, "read bulk lookup")
	}
	b, err := pgx.CollectExactlyOneRow(rows, scanBulk)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, ops.Errorf(ops.ENOTFOUND, "There is no bulk lookup %d.", id)
	}
	return b, pg.Interpret(err, "read bulk lookup")
}

// RunningBulks implements desk.BulkStore.
func (s *Store) RunningBulks(ctx context.Context) ([]desk.BulkLookup, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT `+bulkCols+` FROM bulk_lookups WHERE state = 'running' ORDER BY started_at, id LIMIT 20`)
	if err != nil {
		return nil, pg.Interpret(err, "list bulk lookups")
	}
	list, err := pgx.CollectRows(rows, scanBulk)
	return list, pg.Interpret(err, "list bulk lookups")
}
