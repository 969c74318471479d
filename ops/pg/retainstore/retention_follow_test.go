package retainstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/retainstore"
)

// followedAndProposed gives operation id, open, what a person leaves on it: a follow-up by a
// watcher and a close proposal that a close then superseded. It closes the operation at
// closed, the way the ledger does, so the follow-ups' trigger settles the follow-up and
// writes its two notifications (webhook and email), of which the webhook's is delivered.
func followedAndProposed(t *testing.T, f *fixture, id string, closed time.Time) {
	t.Helper()
	ctx := context.Background()
	var user int64
	if err := f.DB.Pool.QueryRow(ctx, `INSERT INTO users (email, password_hash, role) VALUES ($1, 'x', 'support') RETURNING id`,
		"watcher-"+id+"@example.com").Scan(&user); err != nil {
		t.Fatal(err)
	}
	if ok, err := deskstore.New(f.DB).AddFollowUp(ctx, user, id, closed.Add(-time.Minute)); err != nil || !ok {
		t.Fatalf("follow %s: %v %v", id, ok, err)
	}
	if _, err := f.DB.Pool.Exec(ctx, `INSERT INTO close_proposals (operation_id, tenant_id, kind, to_status, note, proposed_by,
		proposed_at, expires_at, state, decided_by, decided_at, outcome)
		VALUES ($1, $2, 'manual', 'succeeded', 'n', 'a@example.com', $3, $3::timestamptz + interval '1 day', 'superseded', 'w', $3, 'closed')`,
		id, f.Tenant, closed.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.DB.Pool.Exec(ctx, `UPDATE operations SET status = 'succeeded', closed_at = $2, updated_at = $2, closed_by = 'w'
		WHERE id = $1`, id, closed); err != nil {
		t.Fatal(err)
	}
	if _, err := f.DB.Pool.Exec(ctx, `UPDATE follow_up_outbox SET published_at = $2
		WHERE channel = 'webhook' AND follow_up_id IN (SELECT id FROM follow_ups WHERE operation_id = $1)`, id, closed); err != nil {
		t.Fatal(err)
	}
	if n := f.Count(t, `SELECT count(*) FROM follow_up_outbox n JOIN follow_ups u ON u.id = n.follow_up_id WHERE u.operation_id = $1`, id); n != 2 {
		t.Fatalf("%d notifications of the follow-up of %s, want 2", n, id)
	}
}

// TestRetentionRemovesFollowUpsAndProposalsWithTheirOperation: an operation somebody followed
// and somebody proposed to close is history like any other. Past the retention it goes with
// its follow-ups, their notifications (delivered, never taken by a relay, or still failing
// after the whole retention: each carries its own text, and a receiver that has refused it
// that long will not take it) and its proposals; the dry run counts them first. A pass that
// failed on them would fail on every later pass too, and nothing would ever be removed
// again, and a notification that held its operation would keep it for good.
func TestRetentionRemovesFollowUpsAndProposalsWithTheirOperation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old := retainNow.Add(-500 * 24 * time.Hour)
	followed := seedHistory(t, f.DB, f.Tenant, ops.StatusUnknown, ops.KindRefund, old, nil)
	followedAndProposed(t, f, followed, old.Add(time.Hour))
	// More than a batch of other jobs, two by two closed at one time, so that the dry run
	// counts over batches that end between two operations closed together.
	for i := range 11 {
		closed := old.Add(time.Hour + time.Duration(i/2)*time.Minute)
		seedHistory(t, f.DB, f.Tenant, ops.StatusSucceeded, ops.KindLLMJob, old, &closed)
	}
	recentlyClosed := seedHistory(t, f.DB, f.Tenant, ops.StatusUnknown, ops.KindRefund, old, nil)
	followedAndProposed(t, f, recentlyClosed, retainNow.Add(-24*time.Hour))
	undelivered := seedHistory(t, f.DB, f.Tenant, ops.StatusUnknown, ops.KindRefund, old, nil)
	followedAndProposed(t, f, undelivered, old.Add(time.Hour))
	if _, err := f.DB.Pool.Exec(ctx, `UPDATE follow_up_outbox SET attempts = 3, last_error = 'receiver said 503'
		WHERE channel = 'email' AND follow_up_id IN (SELECT id FROM follow_ups WHERE operation_id = $1)`, undelivered); err != nil {
		t.Fatal(err)
	}

	dry, err := newRetention(f, ops.NewManualClock(retainNow)).RunOnce(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if dry.Due != 13 || dry.Operations != 13 || dry.Jobs != 11 || dry.Checkpoints != 11 || dry.FollowUps != 2 || dry.Notifications != 4 || dry.Proposals != 2 {
		t.Errorf("dry run counted %+v, want 13 operations, 11 of them jobs, with 2 follow-ups, 4 notifications and 2 proposals", dry)
	}
	if !strings.Contains(dry.Summary(), "2 follow-ups, 4 follow-up notifications, 2 close proposals") {
		t.Errorf("the dry run says %q", dry.Summary())
	}
	if n := f.Count(t, `SELECT count(*) FROM follow_ups`) + f.Count(t, `SELECT count(*) FROM operations`); n != 17 {
		t.Errorf("the dry run removed rows: %d follow-ups and operations left, want 17", n)
	}

	rep, err := newRetention(f, ops.NewManualClock(retainNow)).RunOnce(ctx, false)
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	if rep.Operations != 13 || rep.FollowUps != 2 || rep.Notifications != 4 || rep.Proposals != 2 {
		t.Fatalf("removed %+v, want 13 operations with 2 follow-ups, 4 notifications and 2 proposals", rep)
	}
	if rep.Counts != dry.Counts {
		t.Errorf("the pass removed %+v, the dry run said %+v", rep.Counts, dry.Counts)
	}
	rowsOf := map[string]string{
		"operations":       `SELECT count(*) FROM operations WHERE id = $1`,
		"follow_ups":       `SELECT count(*) FROM follow_ups WHERE operation_id = $1`,
		"follow_up_outbox": `SELECT count(*) FROM follow_up_outbox n JOIN follow_ups u ON u.id = n.follow_up_id WHERE u.operation_id = $1`,
		"close_proposals":  `SELECT count(*) FROM close_proposals WHERE operation_id = $1`,
	}
	for table, q := range rowsOf {
		if n := f.Count(t, q, followed); n != 0 {
			t.Errorf("the removed operation still has %d rows in %s", n, table)
		}
		if n := f.Count(t, q, undelivered); n != 0 {
			t.Errorf("the operation whose notification failed for the whole retention still has %d rows in %s", n, table)
		}
		if n := f.Count(t, q, recentlyClosed); n == 0 {
			t.Errorf("the operation closed yesterday lost its rows in %s", table)
		}
	}
	if n := f.Count(t, `SELECT count(*) FROM follow_up_outbox`); n != 2 {
		t.Errorf("%d notifications left, want the 2 of the operation closed yesterday", n)
	}
}

// TestRetentionHandlesEveryForeignKeyIntoWhatItRemoves reads the schema's foreign keys from
// the catalog: every one that points at a table the retention removes rows from comes from a
// table the retention also removes rows from, in a step that runs first (or the database
// removes or clears the row itself, ON DELETE), or the pass fails on it and then on every
// later pass. Its columns lead an index, or each removed row would read the whole
// referencing table to check it. A column operation_id with no key (a lifecycle's own rows,
// migration 00071) counts as a key into operations: nothing would fail on the rows it leaves,
// which would name an operation that is gone, and its step finds them through that index.
func TestRetentionHandlesEveryForeignKeyIntoWhatItRemoves(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	steps := retainstore.RetentionTables()
	first := map[string]int{}
	for i, table := range steps {
		if _, ok := first[table]; !ok {
			first[table] = i
		}
	}
	removed := make([]string, 0, len(first))
	for table := range first {
		removed = append(removed, table)
	}
	rows, err := f.DB.Pool.Query(context.Background(), `
SELECT c.conname::text, c.conrelid::regclass::text, c.confrelid::regclass::text, c.confdeltype IN ('c', 'n', 'd'),
	EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid
		AND (string_to_array(i.indkey::text, ' ')::int2[])[1:cardinality(c.conkey)] = c.conkey)
FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
WHERE c.contype = 'f' AND c.conparentid = 0 AND NOT r.relispartition AND c.confrelid::regclass::text = ANY($1)
UNION ALL
SELECT 'column ' || r.relname || '.operation_id', r.oid::regclass::text, 'operations', false,
	EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = r.oid AND i.indkey[0] = a.attnum)
FROM pg_attribute a JOIN pg_class r ON r.oid = a.attrelid
WHERE a.attname = 'operation_id' AND NOT a.attisdropped AND r.relkind IN ('r', 'p') AND NOT r.relispartition
	AND r.relnamespace = 'public'::regnamespace
	AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.contype = 'f' AND c.conrelid = r.oid AND c.conkey = ARRAY[a.attnum])
ORDER BY 2, 1`, removed)
	if err != nil {
		t.Fatal(err)
	}
	type fk struct {
		name, from, to  string
		onDelete, index bool
	}
	fks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (k fk, err error) {
		err = r.Scan(&k.name, &k.from, &k.to, &k.onDelete, &k.index)
		return k, err
	})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, k := range fks {
		found[k.name] = true
	}
	for _, want := range []string{"follow_ups_operation_id_fkey", "column attempts.operation_id"} {
		if !found[want] {
			t.Fatalf("the catalog query misses %s among %d keys into %v", want, len(fks), removed)
		}
	}
	for _, k := range fks {
		if i, ok := first[k.from]; !k.onDelete && (!ok || i >= first[k.to]) {
			t.Errorf("%s: %s points at %s, which the retention removes rows from, and no retention step removes the rows of %s before", k.name, k.from, k.to, k.from)
		}
		if !k.index {
			t.Errorf("%s: no index leads with the columns of %s that point at %s", k.name, k.from, k.to)
		}
	}
}
