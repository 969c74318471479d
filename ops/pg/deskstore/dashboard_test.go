package deskstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestDashboardListsUseIndexes fills a few thousand operations and audit rows, then checks
// that no list the dashboard reads scans a whole table.
func TestDashboardListsUseIndexes(t *testing.T) {
	// Plans are about scale, and filling the tables for them is most of a quick run's time.
	testtool.Heavy(t, "the dashboard lists' plans on thousands of rows")
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	tn, err := db.EnsureTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	// Bulk rows straight in SQL: the plans depend on the table's size, not on how it grew.
	_, err = db.Pool.Exec(ctx, `
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, order_ref, customer_ref,
	payment_ref, amount_cents, currency, status, created_at, updated_at, closed_at, closed_by)
SELECT gen_random_uuid(), $1, 'refund', 'stripe', 'i' || g, 'k' || g, 'fp', 'ord_' || g, 'cus_' || (g % 500),
	'pi_' || g, 100, 'usd', CASE WHEN g % 10 = 0 THEN 'unknown' WHEN g % 10 = 1 THEN 'expired' ELSE 'succeeded' END,
	now() - g * interval '1 minute', now(), CASE WHEN g % 10 > 1 THEN now() END, CASE WHEN g % 10 > 1 THEN 'w' ELSE '' END
FROM generate_series(1, 5000) g`, tn.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Pool.Exec(ctx, `
INSERT INTO audit_log (at, actor, action, entity, entity_id, reason)
SELECT now() - g * interval '1 minute', 'user' || (g % 40) || '@example.com', (ARRAY['open','close','lookup','expire'])[g % 4 + 1],
	'operation', o.id::text, 'r'
FROM generate_series(1, 20000) g JOIN LATERAL (SELECT id FROM operations OFFSET (g % 5000) LIMIT 1) o ON true`)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, received_at)
		 SELECT tenant_id, id, kind, 'r', created_at FROM operations, generate_series(1, 2)`,
		// Finished by their senders, each its own audit entry, as the ledger writes them.
		`INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, finished_at, outcome, audit_id, op_status, op_version, op_phase)
		 SELECT id, 1, provider_key, 'w', created_at, created_at + interval '1 second', 'ok', nextval('audit_log_id_seq'), status, 2, ''
		 FROM operations`,
		`INSERT INTO evidence (operation_id, kind, summary, recorded_by, recorded_at) SELECT id, 'lookup', 's', 'w', created_at FROM operations`,
		`INSERT INTO provider_events (provider, event_id, type, operation_id, received_at) SELECT 'stripe', 'evt_' || id, 'refund.created', id, created_at FROM operations`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	var opID string
	if err := db.Pool.QueryRow(ctx, `SELECT id::text FROM operations LIMIT 1`).Scan(&opID); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cases := []struct {
		name   string
		audit  desk.AuditFilter
		search string
		queue  desk.QueueFilter
	}{
		{name: "plain", audit: desk.AuditFilter{}, search: "ord_42", queue: desk.QueueFilter{Status: ops.StatusUnknown, Now: now}},
		{name: "by person", audit: desk.AuditFilter{Actor: "user7@example.com"}, search: "cus_7", queue: desk.QueueFilter{Status: ops.StatusExpired, TenantID: tn.ID, Now: now}},
		{name: "by action and date", audit: desk.AuditFilter{Action: "close", From: now.Add(-48 * time.Hour), To: now.Add(-24 * time.Hour)}, search: opID,
			queue: desk.QueueFilter{Status: ops.StatusUnknown, OlderThan: time.Hour, Now: now, After: &desk.QueueCursor{CreatedAt: now.Add(-3 * time.Hour), ID: opID}}},
		{name: "finishes by date", audit: desk.AuditFilter{Action: "attempt.ok", From: now.Add(-48 * time.Hour), To: now.Add(-24 * time.Hour),
			After: &desk.AuditCursor{At: now.Add(-30 * time.Hour), ID: 1 << 40}}, search: "ord_7", queue: desk.QueueFilter{Status: ops.StatusUnknown, Now: now}},
		{name: "by operation", audit: desk.AuditFilter{EntityID: opID, After: &desk.AuditCursor{At: now, ID: 1 << 40}}, search: "chat-1",
			queue: desk.QueueFilter{Status: ops.StatusUnknown, Search: "ord_10", Now: now}},
	}
	for _, c := range cases {
		plans, err := deskstore.New(db).DashboardPlans(ctx, opID, c.audit, c.search, c.queue)
		if err != nil {
			t.Fatal(err)
		}
		for name, plan := range plans {
			for _, table := range []string{"operations", "audit_log", "client_requests", "attempts", "evidence", "provider_events"} {
				if seqScan(plan, table) {
					t.Errorf("%s, %s: sequential scan of %s:\n%s", c.name, name, table, plan)
				}
			}
			// A Merge Append of the monthly partitions' indexes is read in order; a Sort node is
			// not, unless it sorts no more than a page (the openings, read in order of their
			// creation and cut to the page's length before their owner is joined).
			if name == "audit" && sortsMoreThan(plan, 51) && c.audit.EntityID == "" {
				t.Errorf("%s: the audit page sorts instead of reading an index in order:\n%s", c.name, plan)
			}
		}
	}
}

// seqScan says whether plan reads table, or one of its monthly partitions, sequentially. A
// month that holds no row yet (planned at a cost under 1, its filter's) is read in no time
// whatever the plan.
func seqScan(plan, table string) bool {
	for _, line := range strings.Split(plan, "\n") {
		if !strings.Contains(line, "Seq Scan on "+table) {
			continue
		}
		_, cost, _ := strings.Cut(line, "(cost=0.00..")
		cost, _, _ = strings.Cut(cost, " ")
		if v, err := strconv.ParseFloat(cost, 64); err != nil || v >= 1 {
			return true
		}
	}
	return false
}

// sortsMoreThan says whether plan has a Sort node the planner expects more than n rows into.
func sortsMoreThan(plan string, n int) bool {
	for _, line := range strings.Split(plan, "\n") {
		_, rest, ok := strings.Cut(line, "Sort  (cost=")
		if !ok || strings.Contains(line, "Incremental Sort") {
			continue
		}
		_, rows, _ := strings.Cut(rest, " rows=")
		rows, _, _ = strings.Cut(rows, " ")
		if v, err := strconv.Atoi(rows); err != nil || v > n {
			return true
		}
	}
	return false
}

// The audit log page filtered to openings reads the operations alone, not the whole log for
// rows that no longer come: an operation's opening is read from its creation.
func TestTheOpeningsPageReadsNoAuditLog(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	plans, err := deskstore.New(db).DashboardPlans(ctx, "00000000-0000-0000-0000-000000000001", desk.AuditFilter{Action: "open"}, "x",
		desk.QueueFilter{Status: ops.StatusUnknown, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plans["audit"], "audit_log") {
		t.Errorf("the openings' page reads the audit log:\n%s", plans["audit"])
	}
}
