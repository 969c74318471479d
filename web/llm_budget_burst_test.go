package web_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops/pg/alertstore"
)

// TestABurstOnAHealthyBudgetIsNoStop is the attack of a tenant whose budget pays for each of
// its calls alone, whose client sends seven at once while the provider holds the first: six
// are refused for a moment, because the leftover is held by the call in flight (ops rule 8
// records each with its reason), and until now they were counted as calls too large for
// what is left, so the burst, six refused of seven, fired TenantLLMBudgetSpent of reason
// llm_budget_too_small and counted on settle_llm_budget_too_small_total: a healthy budget
// told as a stop. The held refusals say so in a reason of their own, with a Retry-After of
// seconds; they count toward neither the rule nor that metric. A call that does not fit what
// is left at all, afterwards, is still refused with llm_budget_too_small and counted.
// ops rule 8
func TestABurstOnAHealthyBudgetIsNoStop(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop")
	body := `{"model":"fake-large","max_completion_tokens":1000,"messages":[{"role":"user","content":"` + holdMarker + `: write a long product description for item 7."}]}`
	// fake-large: 2 micro-dollars an input token (a body's byte), 8 an output token.
	worst := int64(len(body))*2 + 1000*8
	const n = 7
	w.budget(t, "shop", worst+worst/2)
	answers := make(chan stormAnswer, n)
	for i := range n {
		go func() { answers <- w.stormPost("shop", "burst-"+strconv.Itoa(i), body) }()
	}
	var refused []stormAnswer
	arrived := 0
	deadline := time.After(20 * time.Second)
	for arrived+len(refused) < n {
		select {
		case <-w.openai.arrived:
			arrived++
		case a := <-answers:
			refused = append(refused, a)
		case <-deadline:
			w.openai.open()
			t.Fatalf("after 20 s, %d calls reached the provider and %d were answered", arrived, len(refused))
		}
	}
	w.openai.open()
	if arrived != 1 || len(refused) != n-1 {
		t.Fatalf("%d calls reached the provider and %d were refused; want 1 and %d", arrived, len(refused), n-1)
	}
	for _, a := range refused {
		retry, _ := strconv.Atoi(a.retry)
		if a.status != http.StatusTooManyRequests || strings.Contains(a.body, reasonTooSmall) || retry < 1 || retry > int(budgetRefresh/time.Second) {
			t.Errorf("a call of the burst: %d Retry-After %q %.300s; want 429 with a Retry-After of seconds, not %s", a.status, a.retry, a.body, reasonTooSmall)
		}
	}
	if a := <-answers; a.status != http.StatusOK {
		t.Fatalf("the call admitted: %d %.300s", a.status, a.body)
	}
	if got := w.metricLines(t, tooSmallMetric); len(got) != 0 {
		t.Errorf("the burst counts as calls too large for what is left: %v", got)
	}

	as := alertstore.New(w.tw.DB)
	ev := &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: as, Store: as, Clock: w.clock}
	w.clock.Advance(time.Second)
	if _, err := ev.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := budgetAlerts(t, as); len(got) != 0 {
		t.Errorf("TenantLLMBudgetSpent after a burst on a budget that pays for each call: %v; want none", got)
	}

	// What is left once the call ended is less than the burst's calls ask: a lasting refusal.
	w.leave(t, "shop", worst/2)
	if status, _, b := w.capPost(t, "shop", "/v1/chat/completions", "after-burst", body); status != http.StatusTooManyRequests || !strings.Contains(b, reasonTooSmall) {
		t.Fatalf("a call past what is left: %d %.300s; want 429 %s", status, b, reasonTooSmall)
	}
	want := tooSmallMetric + `{api="chat_completions",caller="gateway",tenant="shop"} 1`
	if got := w.metricLines(t, tooSmallMetric); strings.Join(got, "\n") != want {
		t.Errorf("the too-small refusals on /metrics: %v; want %s", got, want)
	}
}
