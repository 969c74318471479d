package deskstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestTheInProgressQueueReadsTheHeldRowsByTheirLease: an in-progress operation takes no
// entry in operations_queue_idx (migration 00073), so the in-progress page reads the rows
// in flight on operations_stalled_idx and sorts them. It must not walk the operations by
// their creation from the oldest of all in search of the few in progress, which are the
// newest; and the page and the counts list them as the queue index did, oldest first.
func TestTheInProgressQueueReadsTheHeldRowsByTheirLease(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	tn, err := db.EnsureTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	// Twenty thousand closed operations, then the newest hundred in progress.
	_, err = db.Pool.Exec(ctx, `
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, lease_owner, lease_until,
	created_at, updated_at, closed_at, closed_by)
SELECT gen_random_uuid(), $1, 'llm_call', 'openai', 'i' || g, 'k' || g, 'fp', CASE WHEN g <= 100 THEN 'in_progress' ELSE 'succeeded' END,
	CASE WHEN g <= 100 THEN 'w' ELSE '' END, CASE WHEN g <= 100 THEN $2::timestamptz + interval '1 minute' END,
	$2::timestamptz - g * interval '1 second', $2, CASE WHEN g > 100 THEN $2::timestamptz END, CASE WHEN g > 100 THEN 'w' ELSE '' END
FROM generate_series(1, 20000) g`, tn.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE operations`); err != nil {
		t.Fatal(err)
	}
	s := deskstore.New(db)
	f := desk.QueueFilter{Status: ops.StatusInProgress, Now: now, Limit: 30}
	plans, err := s.DashboardPlans(ctx, "00000000-0000-0000-0000-000000000001", desk.AuditFilter{}, "x", f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plans["queue"], "operations_stalled_idx") || strings.Contains(plans["queue"], "operations_created_idx") {
		t.Errorf("the in-progress page does not read the rows in flight by their lease:\n%s", plans["queue"])
	}
	var seen []*ops.Operation
	for page, pages := (desk.QueuePage{}), 0; pages == 0 || page.Next != nil; pages++ {
		f.After = page.Next
		if page, err = s.ListQueue(ctx, f, now); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, page.Ops...)
	}
	if len(seen) != 100 {
		t.Fatalf("the in-progress pages list %d operations, want 100", len(seen))
	}
	for i := 1; i < len(seen); i++ {
		if !seen[i-1].CreatedAt.Before(seen[i].CreatedAt) {
			t.Fatalf("the in-progress pages are not oldest first at %d: %v then %v", i, seen[i-1].CreatedAt, seen[i].CreatedAt)
		}
	}
	counts, err := s.QueueCounts(ctx, desk.QueueFilter{Now: now, OlderThan: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if counts[ops.StatusInProgress] != 100 || counts[ops.StatusReceived] != 0 {
		t.Errorf("the scanned counts are %v, want 100 in progress", counts)
	}
}
