package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestTheBudgetRefusalsFollowATenantsNameAsTheLedgersMetricsDo: no command renames a tenant,
// but its name is a row an operator may change in the database (a typo fixed); the ledger's
// metrics read the names at each evaluation, so settle_llm_budget_refused_total, which counts
// the refusals of that tenant (ops rule 8 records each), takes the new name within a
// minute instead of keeping the old one until the server restarts.
func TestTheBudgetRefusalsFollowATenantsNameAsTheLedgersMetricsDo(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "chat")
	w.budget(t, "chat", dollar)
	if _, err := budgetChat(w, "chat", "chat-first"); err != nil {
		t.Fatalf("the first call, within the budget: %v", err)
	}
	w.tw.WaitStatus(t, "chat-first", ops.StatusSucceeded, 10*time.Second)
	w.spendAll(t, "chat")
	w.clock.Advance(budgetRefresh + time.Second)
	if _, err := budgetChat(w, "chat", "chat-past"); err == nil {
		t.Fatal("a call past the budget was served")
	}
	before := budgetRefusedMetric + `{api="chat_completions",caller="gateway",tenant="chat"} 1`
	if got := strings.Join(w.budgetRefusals(t), "\n"); got != before {
		t.Fatalf("the budget refusals on /metrics:\n%s\nwant\n%s", got, before)
	}
	if _, err := w.tw.DB.Pool.Exec(context.Background(), `UPDATE tenants SET name = 'chat-eu' WHERE name = 'chat'`); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Minute + time.Second)
	after := budgetRefusedMetric + `{api="chat_completions",caller="gateway",tenant="chat-eu"} 1`
	if got := strings.Join(w.budgetRefusals(t), "\n"); got != after {
		t.Errorf("a minute after the tenant's name changed, the budget refusals on /metrics:\n%s\nwant\n%s", got, after)
	}
}
