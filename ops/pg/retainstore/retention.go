// Package retainstore holds the retention's statements: the batches that remove closed
// history past its keep from every table that hangs from operations, the counts of a dry
// run, the monthly partitions and retention_state. It implements retain.Store.
package retainstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/retain"
)

var _ retain.Store = (*Store)(nil)

// Store is the retention's store on db's pool.
type Store struct{ db *pg.DB }

// New returns the retention's store on db.
func New(db *pg.DB) *Store { return &Store{db: db} }

// retentionName is the row of retention_state, which the rollups read too.
const retentionName = pg.RetentionStateName

// dueSQL is the filter of a due operation: closed before the cutoff, past its key's
// retention, and needed by nothing that is still alive: no job that is not finished or
// changed since the cutoff, no exception not resolved before it, no client request since
// it (a replay answered from it lately; the partition of received_at prunes to recent
// months). Follow-up notifications hold nothing: each carries its own text, and one still
// undelivered past the whole retention is one its receiver will not take.
const dueSQL = `
	o.status IN ('succeeded', 'failed') AND o.closed_at < @cutoff
	AND o.created_at + make_interval(secs => o.retention_seconds) < @cutoff
	AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.operation_id = o.id
		AND (j.status NOT IN ('published', 'failed') OR j.updated_at >= @cutoff))
	AND NOT EXISTS (SELECT 1 FROM recon_exceptions e WHERE e.operation_id = o.id
		AND (e.status <> 'resolved' OR e.resolved_at >= @cutoff))
	AND NOT EXISTS (SELECT 1 FROM client_requests cr WHERE cr.operation_id = o.id AND cr.received_at >= @cutoff)`

// retentionStep deletes from table the rows of the batch's operations (@ids) that where
// matches. @ids is a uuid[]: a where that compares it with text casts it there
// (@ids::uuid[]::text[]), since a dry run's count puts several wheres in one statement, where
// the parameter can have one type only.
type retentionStep struct {
	table, where string
	count        func(*retain.Counts) *int64
}

// retentionSteps delete the rows hanging from the batch's operations (@ids), children before
// parents, all in the batch's transaction. @from is the batch's oldest creation: no row of
// these operations is older, so the partitioned tables skip the months before it. Outbox
// events are removed once delivered before the cutoff; one not yet delivered outlives its
// operation (its payload is whole, so it is still delivered at least once, ops rule 10).
// A follow-up's notifications go with it: those delivered, and those of a channel left
// unset, which no relay ever took (one a relay is still trying to deliver keeps the
// operation from being due). Every foreign key into a table a step deletes from must come from a
// table a step before it deletes from, or the batch fails, and so does every later pass
// (TestRetentionHandlesEveryForeignKeyIntoWhatItRemoves reads them from the catalog). A
// lifecycle's client requests, attempts, evidence and charges keep no key into operations
// (migration 00071): nothing fails on them, and only their steps here keep them from naming
// an operation that is gone (TestRetentionLeavesNoRowNamingARemovedOperation).
var retentionSteps = []retentionStep{
	{"job_checkpoints", `job_id IN (SELECT id FROM jobs WHERE operation_id = ANY(@ids))`,
		func(c *retain.Counts) *int64 { return &c.Checkpoints }},
	{"job_outbox", `published_at < @cutoff AND entity_id IN (SELECT id::text FROM jobs WHERE operation_id = ANY(@ids))`,
		func(c *retain.Counts) *int64 { return &c.OutboxEvents }},
	{"jobs", `operation_id = ANY(@ids)`, func(c *retain.Counts) *int64 { return &c.Jobs }},
	{"audit_log", `at >= @from AND entity = 'recon_exception'
		AND entity_id IN (SELECT id::text FROM recon_exceptions WHERE operation_id = ANY(@ids))`,
		func(c *retain.Counts) *int64 { return &c.AuditRows }},
	{"recon_exceptions", `operation_id = ANY(@ids)`, func(c *retain.Counts) *int64 { return &c.Exceptions }},
	{"audit_log", `at >= @from AND evidence_id IN (SELECT id FROM evidence WHERE operation_id = ANY(@ids))`,
		func(c *retain.Counts) *int64 { return &c.AuditRows }},
	{"audit_log", `at >= @from AND entity = 'operation' AND entity_id = ANY(@ids::uuid[]::text[])`,
		func(c *retain.Counts) *int64 { return &c.AuditRows }},
	{"evidence", `operation_id = ANY(@ids)`, func(c *retain.Counts) *int64 { return &c.Evidence }},
	{"client_requests", `received_at >= @from AND operation_id = ANY(@ids)`,
		func(c *retain.Counts) *int64 { return &c.ClientRequests }},
	{"attempts", `started_at >= @from AND operation_id = ANY(@ids)`,
		func(c *retain.Counts) *int64 { return &c.Attempts }},
	{"provider_charges", `operation_id = ANY(@ids)`, func(c *retain.Counts) *int64 { return &c.Charges }},
	{"provider_events", `operation_id = ANY(@ids)`, func(c *retain.Counts) *int64 { return &c.ProviderEvents }},
	{"outbox", `published_at < @cutoff AND entity_id = ANY(@ids::uuid[]::text[])`,
		func(c *retain.Counts) *int64 { return &c.OutboxEvents }},
	{"follow_up_outbox", `follow_up_id IN (SELECT id FROM follow_ups WHERE operation_id = ANY(@ids))`,
		func(c *retain.Counts) *int64 { return &c.Notifications }},
	{"follow_ups", `operation_id = ANY(@ids)`, func(c *retain.Counts) *int64 { return &c.FollowUps }},
	{"close_proposals", `operation_id = ANY(@ids)`, func(c *retain.Counts) *int64 { return &c.Proposals }},
	{"operations", `id = ANY(@ids)`, func(c *retain.Counts) *int64 { return &c.Operations }},
}

// deleteSQL is the step at i's DELETE.
func deleteSQL(i int) string {
	s := retentionSteps[i]
	return `DELETE FROM ` + s.table + ` WHERE ` + s.where
}

// countSQL counts what the step at i would delete: the rows it matches that no earlier step
// deletes first from the same table (an operation's audit row may also name its evidence).
// Each step's subqueries read only tables that later steps delete from, so nothing counted
// here depends on a deletion not made.
func countSQL(i int) string {
	s := retentionSteps[i]
	q := `SELECT count(*) FROM ` + s.table + ` WHERE (` + s.where + `)`
	for _, e := range retentionSteps[:i] {
		if e.table == s.table {
			q += ` AND NOT coalesce((` + e.where + `), false)`
		}
	}
	return q
}

// settledOrphan is the filter of an exception e that names no operation (a charge or usage
// the ledger does not explain) and that nobody needs any more: resolved, and neither
// resolved nor seen again since the cutoff.
const settledOrphan = `e.operation_id IS NULL AND e.status = 'resolved' AND e.resolved_at < @cutoff AND e.last_seen_at < @cutoff`

// orphanStep deletes, a batch at a time, old rows of table that belong to no operation: those
// whose key is in pick. pick is a SELECT with one %s where its LIMIT goes, so that a dry run
// counts with the same filter what a whole pass would remove.
//
// key is the columns matched against those pick selects; it may begin with a predicate
// that every row pick selects satisfies, repeated so that the planner may find the rows on
// the partial index of that predicate.
type orphanStep struct {
	table, key, pick string
	count            func(*retain.Counts) *int64
}

// sql is the step's DELETE of one batch, or with dry its count over all batches.
func (s orphanStep) sql(dry bool) string {
	if dry {
		return fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s IN (`+s.pick+`)`, s.table, s.key, "")
	}
	return fmt.Sprintf(`DELETE FROM %s WHERE %s IN (`+s.pick+`)`, s.table, s.key, "LIMIT @batch")
}

// orphanSteps delete old rows that belong to no operation and that nothing reads but
// history: refused client requests, the retention's own audit rows, the receivers' inbox of
// applied events, and charges the provider made that no operation explains (with their
// settled exceptions, oldest first, and those exceptions' audit rows). Such a charge stays
// while an exception that is not settled still names it: an open one, or one resolved since
// the cutoff.
var orphanSteps = []orphanStep{
	{"audit_log", "(id, at)", `SELECT id, at FROM audit_log WHERE entity = 'recon_exception'
		AND entity_id IN (SELECT e.id::text FROM recon_exceptions e WHERE ` + settledOrphan + ` ORDER BY e.id %s)`,
		func(c *retain.Counts) *int64 { return &c.AuditRows }},
	{"recon_exceptions", "id", `SELECT e.id FROM recon_exceptions e WHERE ` + settledOrphan + ` ORDER BY e.id %s`,
		func(c *retain.Counts) *int64 { return &c.Exceptions }},
	// Charges have no primary key (a success's charge would take an entry nobody reads): an
	// orphan is found again on provider_charges_orphan_idx by its charge time and its id.
	{"provider_charges", "operation_id IS NULL AND (charged_at, id)", `SELECT pc.charged_at, pc.id FROM provider_charges pc
		WHERE pc.operation_id IS NULL AND pc.charged_at < @cutoff AND pc.seen_at < @cutoff
			AND NOT EXISTS (SELECT 1 FROM recon_exceptions e WHERE e.operation_id IS NULL AND e.provider = pc.provider
				AND (e.ref = pc.charge_ref OR pc.charge_ref = ANY(e.charge_refs)) AND NOT (` + settledOrphan + `))
		ORDER BY pc.charged_at %s`,
		func(c *retain.Counts) *int64 { return &c.Charges }},
	{"client_requests", "(id, received_at)", `SELECT id, received_at FROM client_requests
		WHERE received_at < @cutoff AND operation_id IS NULL %s`,
		func(c *retain.Counts) *int64 { return &c.ClientRequests }},
	{"audit_log", "(id, at)", `SELECT id, at FROM audit_log WHERE at < @cutoff AND entity = 'retention' %s`,
		func(c *retain.Counts) *int64 { return &c.AuditRows }},
	// A receiver's inbox only has to outlive redelivery, and events are pruned from the
	// outboxes after SETTLE_OUTBOX_KEEP, which the retention is never shorter than.
	{"consumed_events", "(consumer, event_id)", `SELECT consumer, event_id FROM consumed_events
		WHERE applied_at < @cutoff ORDER BY applied_at %s`,
		func(c *retain.Counts) *int64 { return &c.ConsumedEvents }},
}

// EnsurePartitions implements retain.Store, while the retention's lease is held, so that two
// replicas never both create a month: a pass whose lease was lost creates nothing.
func (s *Store) EnsurePartitions(ctx context.Context, l ops.Lease, now time.Time, ahead int) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		if held, err := pg.HoldLease(ctx, tx, l, now); err != nil || !held {
			return err
		}
		return tx.QueryRow(ctx, `SELECT settle_month_partitions($1, $1::timestamptz + make_interval(months => $2))`,
			now, ahead).Scan(&n)
	})
	if err != nil {
		return 0, pg.Interpret(err, "create monthly partitions")
	}
	return n, nil
}

// CountDue implements retain.Store.
func (s *Store) CountDue(ctx context.Context, p retain.BatchParams) (int64, error) {
	var n int64
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM operations o WHERE `+dueSQL,
		pgx.NamedArgs{"cutoff": p.Cutoff}).Scan(&n); err != nil {
		return 0, pg.Interpret(err, "count operations due for removal")
	}
	return n, nil
}

// CountRemoved implements retain.Store: in one read-only snapshot, the due operations a batch
// at a time, in the order of their closing, with each step's count of what it would delete
// from them.
func (s *Store) CountRemoved(ctx context.Context, p retain.BatchParams) (retain.Counts, error) {
	type due struct {
		id              string
		created, closed time.Time
	}
	var c retain.Counts
	err := pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		last := due{id: uuid.Nil.String()}
		for {
			rows, err := tx.Query(ctx, `SELECT o.id::text, o.created_at, o.closed_at FROM operations o WHERE `+dueSQL+`
	AND (o.closed_at, o.id) > (@after_at, @after_id::uuid) ORDER BY o.closed_at, o.id LIMIT @batch`,
				pgx.NamedArgs{"cutoff": p.Cutoff, "batch": p.Batch, "after_at": last.closed, "after_id": last.id})
			if err != nil {
				return err
			}
			batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (d due, err error) {
				err = r.Scan(&d.id, &d.created, &d.closed)
				return d, err
			})
			if err != nil || len(batch) == 0 {
				return err
			}
			ids, from := make([]string, len(batch)), batch[0].created
			for i, d := range batch {
				ids[i] = d.id
				if d.created.Before(from) {
					from = d.created
				}
			}
			args := pgx.NamedArgs{"ids": ids, "from": from, "cutoff": p.Cutoff}
			for i, s := range retentionSteps {
				var n int64
				if err := tx.QueryRow(ctx, countSQL(i), args).Scan(&n); err != nil {
					return err
				}
				*s.count(&c) += n
			}
			if len(batch) < p.Batch {
				return nil
			}
			last = batch[len(batch)-1]
		}
	})
	if err != nil {
		return retain.Counts{}, pg.Interpret(err, "count the rows of the operations due for removal")
	}
	return c, nil
}

// CountOrphans implements retain.Store, in one read-only snapshot.
func (s *Store) CountOrphans(ctx context.Context, p retain.BatchParams) (retain.Counts, error) {
	var c retain.Counts
	err := pgx.BeginTxFunc(ctx, s.db.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		for _, s := range orphanSteps {
			var n int64
			if err := tx.QueryRow(ctx, s.sql(true), pgx.NamedArgs{"cutoff": p.Cutoff}).Scan(&n); err != nil {
				return err
			}
			*s.count(&c) += n
		}
		return nil
	})
	if err != nil {
		return retain.Counts{}, pg.Interpret(err, "count rows of no operation due for removal")
	}
	return c, nil
}

// RemoveBatch implements retain.Store: one transaction while the retention's lease is held,
// which it locks in share mode, so nobody takes the lease over before the batch ends. It
// also locks the rollup job's lease row exclusively, so a rollup pass never counts raw rows
// half removed, and moves removed_before, which keeps the rollup job from recomputing those
// hours.
func (s *Store) RemoveBatch(ctx context.Context, p retain.BatchParams) (retain.Batch, bool, error) {
	var b retain.Batch
	var locked bool
	err := pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		var err error
		if locked, err = pg.HoldLease(ctx, tx, p.Lease, p.Now); err != nil || !locked {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '10s'`); err != nil {
			return err
		}
		if err := pg.LockLeaseRow(ctx, tx, recon.RollupRole, true); err != nil {
			return err
		}
		var ids []string
		var from *time.Time
		if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(id::text), '{}'), min(created_at) FROM (
	SELECT o.id, o.created_at FROM operations o WHERE `+dueSQL+`
	ORDER BY o.closed_at LIMIT @batch FOR UPDATE SKIP LOCKED) d`,
			pgx.NamedArgs{"cutoff": p.Cutoff, "batch": p.Batch}).Scan(&ids, &from); err != nil {
			return err
		}
		args := pgx.NamedArgs{"ids": ids, "from": from, "cutoff": p.Cutoff, "batch": p.Batch}
		if len(ids) > 0 {
			for i, s := range retentionSteps {
				tag, err := tx.Exec(ctx, deleteSQL(i), args)
				if err != nil {
					return err
				}
				*s.count(&b.Counts) += tag.RowsAffected()
			}
		}
		b.More = len(ids) == p.Batch
		for _, s := range orphanSteps {
			tag, err := tx.Exec(ctx, s.sql(false), args)
			if err != nil {
				return err
			}
			*s.count(&b.Counts) += tag.RowsAffected()
			b.More = b.More || tag.RowsAffected() == int64(p.Batch)
		}
		if b.Counts.Operations+b.Counts.Charges == 0 {
			return nil
		}
		// The rollups counted these rows; their hours are not recomputed from what is left.
		_, err = tx.Exec(ctx, `INSERT INTO retention_state (name, removed_before) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET removed_before = greatest(retention_state.removed_before, excluded.removed_before)`,
			retentionName, p.Cutoff)
		return err
	})
	if err != nil {
		return retain.Batch{}, locked, pg.Interpret(err, "remove a retention batch")
	}
	return b, locked, nil
}

// RecordPass implements retain.Store.
func (s *Store) RecordPass(ctx context.Context, rep retain.Report, now time.Time, actor string) error {
	report, _ := json.Marshal(rep)
	_, err := s.db.Pool.Exec(ctx, `
WITH st AS (
	INSERT INTO retention_state (name, last_run_at, last_report) VALUES (@name, @now, @report)
	ON CONFLICT (name) DO UPDATE SET last_run_at = excluded.last_run_at, last_report = excluded.last_report
)
INSERT INTO audit_log (at, actor, action, entity, entity_id, after)
VALUES (@now, @actor, 'retention.pass', 'retention', @name, @report)`,
		pgx.NamedArgs{"name": retentionName, "now": now, "report": report, "actor": actor})
	return pg.Interpret(err, "record the retention pass")
}

// partitionedTables are the tables partitioned by month (migration 00031).
var partitionedTables = []string{"client_requests", "attempts", "audit_log"}

// DropEmptyPartitions implements retain.Store. Dropping a partition takes an ACCESS
// EXCLUSIVE lock on its table for an instant: each drop is its own transaction that waits at
// most half a second for it, so a busy table delays the drop to the next pass instead of
// queueing the writers behind it.
func (s *Store) DropEmptyPartitions(ctx context.Context, l ops.Lease, now, cutoff time.Time) ([]string, bool, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relname = ANY($1) AND c.relname ~ '_[0-9]{4}_[0-9]{2}$'
	AND to_date(right(c.relname, 7), 'YYYY_MM') + interval '1 month' <= $2::timestamptz AT TIME ZONE 'UTC'
ORDER BY c.relname`, partitionedTables, cutoff)
	if err != nil {
		return nil, false, pg.Interpret(err, "list old partitions")
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, pg.Interpret(err, "list old partitions")
	}
	var dropped []string
	for _, name := range names {
		ok, locked, err := s.dropIfEmpty(ctx, l, now, name)
		if err != nil || !locked {
			return dropped, locked, err
		}
		if ok {
			dropped = append(dropped, name)
		}
	}
	return dropped, true, nil
}

// dropIfEmpty drops the partition name if it holds no row, while l is held; a lock not had
// in time is no error (ok false).
func (s *Store) dropIfEmpty(ctx context.Context, l ops.Lease, now time.Time, name string) (ok, locked bool, err error) {
	err = pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		var err error
		if locked, err = pg.HoldLease(ctx, tx, l, now); err != nil || !locked {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '500ms'`); err != nil {
			return err
		}
		ident := pgx.Identifier{name}.Sanitize()
		var any bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+ident+`)`).Scan(&any); err != nil || any {
			return err
		}
		if _, err := tx.Exec(ctx, `DROP TABLE `+ident); err != nil {
			return err
		}
		ok = true
		return nil
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" {
		return false, true, nil
	}
	if err != nil {
		return false, locked, pg.Interpret(err, "drop partition "+name)
	}
	return ok, locked, nil
}
