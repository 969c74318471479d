package pg_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestALifecycleLandsOnlyInTheIndexesItsReadersUse: every write of an operation's row is a
// new row version (status is indexed, so no write is heap-only), and each index whose
// predicate the version satisfies takes an entry and its WAL. An open operation is read by
// its intent (ops rule 2: one open operation per intent), by its refs, by its payment while
// open, and, while in progress, by its lease (the reaper, the in-progress queue and its
// expiry): not through the queue or expiry indexes of the rows nobody holds, which the
// reaper reads by their own (migration 00073). No operation lands in an index by its provider
// key, which is its id's, unique and found on the primary key (migration 00075). A closed
// one is read by its intent, by when it was opened and closed (tallies, rollups, retention), by its
// provider's record, and, for a call, by the body purge, which reads closed calls only. An LLM
// operation, open or closed, is also read by its tenant and the UTC day it was opened: the
// spend of a tenant's day that its budget caps (migration 00087). A
// received one, which nobody holds, is read through the queue and expiry indexes alone: the
// queue index serves its oldest first too, so no index of received rows by age remains.
func TestALifecycleLandsOnlyInTheIndexesItsReadersUse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	common := []string{"operations_created_idx", "operations_intent_seq_idx", "operations_pkey"}
	open := append([]string{"operations_open_intent_idx", "operations_stalled_idx"}, common...)
	closed := append([]string{"operations_closed_idx", "operations_tenant_provider_ref_idx"}, common...)
	check := func(what, id string, want []string) {
		t.Helper()
		slices.Sort(want)
		if got := f.indexesHolding(t, "operations", "id = '"+id+"'"); !slices.Equal(got, want) {
			t.Errorf("%s lands in %v, want %v", what, got, want)
		}
	}

	r, err := f.seed().Open(ctx, f.refund("idx-life", 100), "r1", "w")
	if err != nil {
		t.Fatal(err)
	}
	check("an open refund", r.Op.ID, append([]string{"operations_order_idx", "operations_payment_open_idx"}, open...))
	if _, err := f.seed().Finish(ctx, r.Op, r.Attempt, "w", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
		Result: &ops.Result{ProviderRef: "re_idx_life"}}); err != nil {
		t.Fatal(err)
	}
	check("a closed refund", r.Op.ID, append([]string{"operations_order_idx"}, closed...))

	c, err := f.seed().Open(ctx, ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: "idx-call",
		Fingerprint: "fp-idx-call", Request: []byte(`{"body":{"model":"m","input":"hi"}}`), Retention: 24 * time.Hour}, "r2", "gw")
	if err != nil {
		t.Fatal(err)
	}
	spend := "operations_tenant_llm_spend_idx"
	check("an open call", c.Op.ID, append([]string{spend}, open...))
	if _, err := f.seed().Finish(ctx, c.Op, c.Attempt, "gw", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
		Result: &ops.Result{ProviderRef: "resp_idx_call", Body: []byte(`{"id":"resp_idx_call"}`)}}); err != nil {
		t.Fatal(err)
	}
	check("a closed call", c.Op.ID, append([]string{"operations_body_purge_idx", spend}, closed...))

	q, err := f.seed().Open(ctx, f.refund("idx-queued", 100), "r3", "")
	if err != nil {
		t.Fatal(err)
	}
	if q.Op.Status != ops.StatusReceived {
		t.Fatalf("an opening nobody claims is %s, want received", q.Op.Status)
	}
	check("a received refund", q.Op.ID, append([]string{"operations_open_intent_idx", "operations_order_idx",
		"operations_payment_open_idx", "operations_queue_idx", "operations_retry_until_idx"}, common...))
}

// TestExpiryReadsStalledCallsByTheirLease: the expiry of the reaper's every tick reads the
// rows nobody holds through operations_retry_until_idx and the in-progress ones through
// operations_stalled_idx, by the lease that ran out (or is missing): not every open
// operation through the intent index, nor the whole table, now that an in-progress row takes
// no entry in the expiry index (migration 00073).
func TestExpiryReadsStalledCallsByTheirLease(t *testing.T) {
	db := pgtest.New(t)
	plan := pgtest.PlanWithoutSeqScan(t, db, pg.ExpireDueSQL, pgx.NamedArgs{"actor": "reaper", "now": t0, "limit": 100, "lease_expired": ops.ErrorLeaseExpired})
	for _, want := range []string{
		"Index Scan using operations_retry_until_idx", "Index Cond: (retry_until <= ",
		"Index Scan using operations_stalled_idx", "Index Cond: (lease_until <= ", "Index Cond: (lease_until IS NULL)",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("the expiry's plan lacks %q:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "operations_open_intent_idx") || strings.Contains(plan, "Seq Scan on operations") {
		t.Errorf("the expiry reads every open operation:\n%s", plan)
	}
}
