package pg_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

// TestASuccessfulAttemptClosesAsAHeapOnlyUpdate: the close of a successful attempt (a
// refund's, a call's) writes only columns no index of attempts holds, on a page with room
// left for the new row version, so it is a heap-only update and adds no index entry. Enough
// attempts are opened first to fill several pages, as a busy server does before their closes
// come. The close still records everything ops rule 8 counts (outcome, usage, cost, the
// possible-duplicate mark), and the provider's record id stays on the operation (ops rule 9).
func TestASuccessfulAttemptClosesAsAHeapOnlyUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := pgtest.NewWithURL(t)
	db, tenant := openWithTenant(ctx, t, url)
	f := &fixture{db: db, clock: ops.NewManualClock(t0), tenant: tenant}
	f.ledger = ops.NewLedger(db, f.clock)
	f.ledger.Register(refund.Kind(), llm.Kind(), jobs.Kind(false))

	// The attempts land in a month created as the retention creates months ahead.
	if _, err := db.Pool.Exec(ctx, `SELECT settle_month_partitions($1, $1)`, t0); err != nil {
		t.Fatal(err)
	}
	const each = 120
	var opened []ops.Admission
	for i := range each {
		r, err := f.seed().Open(ctx, f.refund(fmt.Sprintf("hot-%d", i), 100), fmt.Sprintf("r-%d", i), "w")
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.seed().Open(ctx, ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai",
			IntentKey: fmt.Sprintf("hot-call-%d", i), Fingerprint: fmt.Sprintf("fp-hot-call-%d", i),
			Request: []byte(`{"body":{"model":"m","input":"hi"}}`), Retention: 24 * time.Hour}, fmt.Sprintf("c-%d", i), "gw")
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, r, c)
	}
	cost := int64(1234)
	for i, a := range opened {
		res := ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200, ProviderRequestID: fmt.Sprintf("req_%08d", i),
			Result: &ops.Result{ProviderRef: fmt.Sprintf("re_hot_%08d", i), Body: []byte(`{"id":"x"}`)}}
		owner := "w"
		if a.Op.Kind == ops.KindLLMCall {
			owner = "gw"
			// The usage record the gateway keeps with a call's answer.
			res.Usage, res.CostMicros = []byte(fmt.Sprintf(`{"prompt_tokens":1234,"completion_tokens":345,"cached_tokens":0,`+
				`"total_tokens":1579,"model":"gpt-4o-mini-2024-07-18","cost_micros":1234,"cost_known":true,"currency":"USD",`+
				`"provider_request_id":"req_%032d","attempt":1,"possible_duplicates":0}`, i)), &cost
			res.ProviderRequestID = fmt.Sprintf("req_%032d", i)
			res.Result.ProviderRef = fmt.Sprintf("chatcmpl-hot%024d", i)
			res.Result.Usage, res.Result.CostMicros = res.Usage, cost
		}
		if _, err := f.seed().Finish(ctx, a.Op, a.Attempt, owner, res); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"attempts_operation_idx", "attempts_pkey", "attempts_started_idx"}
	if got := f.indexesHolding(t, "attempts", "operation_id = '"+opened[0].Op.ID+"'"); !slices.Equal(got, want) {
		t.Errorf("a closed refund's attempt lands in %v, want %v", got, want)
	}
	var ref string
	if err := db.Pool.QueryRow(ctx, `SELECT provider_ref FROM operations WHERE id = $1`, opened[1].Op.ID).Scan(&ref); err != nil || ref == "" {
		t.Errorf("the closed call holds no provider record (%q, %v)", ref, err)
	}
	// Nothing but the closes updated attempts in this database. A close finds room on its
	// page once the versions earlier closes left there are pruned, and a snapshot held
	// meanwhile in this database (an autovacuum's ANALYZE of the rows just written, which
	// a busy cluster of many test databases starts at any moment) keeps them: then a page
	// fills and a close falls back to an ordinary update, as it would on a server. Without
	// any pruning (a snapshot held through every close) the 40 % a page keeps free held the
	// closes of about half its rows (123 of 240), and with pruning all of them; the schema
	// before migration 00072 made none heap-only.
	db.Close()
	if all, hot := attemptUpdates(t, url, int64(len(opened))); all != int64(len(opened)) || hot*5 < all*2 {
		t.Errorf("%d closes made %d updates of attempts, %d of them heap-only; want at least two in five heap-only", len(opened), all, hot)
	}
}

// attemptUpdates returns the updates of every partition of attempts in the database at url
// and how many of them were heap-only, once want of them are counted or after five seconds.
// Each backend sends its counts when it ends, so the pool that wrote them is closed first.
func attemptUpdates(t *testing.T, url string, want int64) (all, hot int64) {
	t.Helper()
	ctx := context.Background()
	db, err := pg.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := db.Pool.QueryRow(ctx, `SELECT coalesce(sum(s.n_tup_upd), 0)::bigint, coalesce(sum(s.n_tup_hot_upd), 0)::bigint
FROM pg_stat_user_tables s JOIN pg_inherits i ON i.inhrelid = s.relid WHERE i.inhparent = 'attempts'::regclass`).Scan(&all, &hot); err != nil {
			t.Fatal(err)
		}
		if all >= want || time.Now().After(deadline) {
			return all, hot
		}
	}
}
