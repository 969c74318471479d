package web_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
)

// budgetRefusedMetric is the counter of the calls refused for a spent LLM budget.
const budgetRefusedMetric = "settle_llm_budget_refused_total"

// budgetRefusals scrapes /metrics and returns the lines of the budget refusals' counter.
func (w *budgetWorld) budgetRefusals(t *testing.T) []string {
	t.Helper()
	resp, err := http.Get(w.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, budgetRefusedMetric+"{") {
			out = append(out, line)
		}
	}
	return out
}

// TestMetricsCountTheCallsABudgetRefused is the attack of a tenant's customers losing their
// LLM calls to a spent budget while nothing counts it: every call the gateway refuses with
// 429 tenant_budget_spent, a new call of any API or a resend held to the budget, counts once
// in settle_llm_budget_refused_total by tenant, API and caller, so an operator (and the
// alert rules reading the counter) learn of the stop. A replay the budget does not refuse,
// and a call within the budget, count nothing; a tenant without refusals has no series.
// ops rule 8
func TestMetricsCountTheCallsABudgetRefused(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "chat", "claude", "bank")
	w.budget(t, "chat", dollar)
	w.budget(t, "claude", dollar)
	for _, r := range []struct {
		tenant string
		call   budgetCall
	}{{"chat", budgetChat}, {"claude", budgetMessages}} {
		if _, err := r.call(w, r.tenant, r.tenant+"-first"); err != nil {
			t.Fatalf("%s's first call, within the budget: %v", r.tenant, err)
		}
		w.tw.WaitStatus(t, r.tenant+"-first", ops.StatusSucceeded, 10*time.Second)
		w.spendAll(t, r.tenant)
	}
	if _, err := budgetChat(w, "bank", "bank-1"); err != nil {
		t.Fatalf("a tenant without a budget: %v", err)
	}
	if got := w.budgetRefusals(t); len(got) != 0 {
		t.Errorf("before any refusal: %v, want no series", got)
	}
	w.clock.Advance(budgetRefresh + time.Second)
	for i := range 3 {
		if _, err := budgetChat(w, "chat", "chat-past-"+string(rune('a'+i))); err == nil {
			t.Fatal("a chat call past the budget was served")
		}
	}
	if _, err := budgetMessages(w, "claude", "claude-past"); err == nil {
		t.Fatal("a messages call past the budget was served")
	}
	// A replay of a key that ran is answered, not refused: it counts nothing.
	if replayed, err := budgetChat(w, "chat", "chat-first"); err != nil || !replayed {
		t.Fatalf("the replay: %v %v", replayed, err)
	}
	want := []string{
		budgetRefusedMetric + `{api="chat_completions",caller="gateway",tenant="chat"} 3`,
		budgetRefusedMetric + `{api="messages",caller="gateway",tenant="claude"} 1`,
	}
	if got := w.budgetRefusals(t); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the budget refusals on /metrics:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMetricsCountAResendABudgetRefused holds the count to the resends too: a client that
// parked a call the provider refused and retries its key past the budget is refused, and the
// refusal counts once, as a new call's does.
// ops rule 8
func TestMetricsCountAResendABudgetRefused(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop")
	w.budget(t, "shop", dollar)
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultOverloaded, Times: 3})
	if _, err := budgetChat(w, "shop", "parked"); err == nil {
		t.Fatal("a call the provider refused three times was answered")
	}
	if _, err := budgetChat(w, "shop", "spend"); err != nil {
		t.Fatalf("the call within the budget: %v", err)
	}
	w.tw.WaitStatus(t, "spend", ops.StatusSucceeded, 10*time.Second)
	w.spendAll(t, "shop")
	w.clock.Advance(budgetRefresh + time.Second)
	if _, err := budgetChat(w, "shop", "parked"); err == nil {
		t.Fatal("the resend past the budget was served")
	}
	want := budgetRefusedMetric + `{api="chat_completions",caller="gateway",tenant="shop"} 1`
	if got := w.budgetRefusals(t); len(got) != 1 || got[0] != want {
		t.Errorf("the budget refusals on /metrics: %v, want %s", got, want)
	}
}
