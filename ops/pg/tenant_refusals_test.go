package pg_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// TestRefusalSharesCountEachTenantsRequestsAndThoseRefusedForTheReason: the tenants page
// tells a tenant stopped by what is left of its LLM budget from the ledger's records of its
// requests (ops rule 8): for each tenant and kind with a request refused for the reason in
// the window, all its requests received in the window and those refused so. A refusal of
// another reason counts as a request, not as refused; a tenant refused for none, and every
// request outside the window, count nothing.
// ops rule 8
func TestRefusalSharesCountEachTenantsRequestsAndThoseRefusedForTheReason(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newSpendDay(t)
	from := f.day.Add(10 * time.Hour)
	to := from.Add(10 * time.Minute)
	for _, r := range []struct {
		tenant       int64
		kind, answer string
		reason       string
		at           time.Time
		n            int
	}{
		{f.shop, "llm_call", "rejected", "llm_budget_too_small", from.Add(time.Minute), 3},
		{f.shop, "llm_call", "new", "", from.Add(2 * time.Minute), 1},
		{f.shop, "llm_call", "rejected", "model_not_priced", from.Add(3 * time.Minute), 1},
		{f.shop, "llm_job", "rejected", "llm_budget_too_small", from.Add(4 * time.Minute), 1},
		{f.shop, "llm_call", "rejected", "llm_budget_too_small", from.Add(-time.Second), 5},
		{f.shop, "llm_call", "rejected", "llm_budget_too_small", to, 5},
		{f.bank, "llm_call", "new", "", from.Add(time.Minute), 4},
		{f.bank, "llm_call", "rejected", "tenant_budget_spent", from.Add(time.Minute), 2},
	} {
		if _, err := f.db.Pool.Exec(ctx, `
INSERT INTO client_requests (tenant_id, kind, request_ref, duplicate, answer, reason, received_at, answered_at)
SELECT @tenant::bigint, @kind, 'r-' || i, false, @answer, nullif(@reason, ''), @at::timestamptz, @at::timestamptz
FROM generate_series(1, @n::int) i`, pgx.NamedArgs{"tenant": r.tenant, "kind": r.kind, "answer": r.answer, "reason": r.reason,
			"at": r.at, "n": r.n}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.db.RefusalShares(ctx, "llm_budget_too_small", from, to, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []ops.RefusalShare{{TenantID: f.shop, Kind: ops.KindLLMCall, Requests: 5, Refused: 3},
		{TenantID: f.shop, Kind: ops.KindLLMJob, Requests: 1, Refused: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RefusalShares = %+v, want %+v", got, want)
	}
}
