package web_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/llm"
)

// stormAnswer is one call of a storm: its status, Retry-After and body.
type stormAnswer struct {
	status int
	retry  string
	body   string
}

// stormPost sends one chat completion of body for tenant with key, for a goroutine of its
// own: a failure to send is an answer of status 0.
func (w *budgetWorld) stormPost(tenant, key, body string) stormAnswer {
	req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.tokens[tenant])
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return stormAnswer{body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return stormAnswer{status: resp.StatusCode, retry: resp.Header.Get("Retry-After"), body: string(b)}
}

// TestConcurrentCallsCannotSpendTheLeftoverTwice is the attack of a tenant that sends many
// new calls at once, each of whose worst case fits what is left of its budget on its own:
// admitted each against the same spend, all of them would be sent and billed, the leftover
// spent many times over. Five calls whose worst cases three fit in the leftover are sent
// together while the provider holds them: three reach the provider, the other two are
// refused with 429 llm_budget_held, recorded as the tenant's refused requests, reach
// no provider, and say the leftover is held by calls in flight, with a short Retry-After
// rather than midnight. Once the three end, their holds go: a smaller call that did not fit
// beside them fits what they left.
// ops rule 8
// ops rule 12
func TestConcurrentCallsCannotSpendTheLeftoverTwice(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop")
	body := `{"model":"fake-large","max_completion_tokens":1000,"messages":[{"role":"user","content":"` + holdMarker + `: write a long product description for item 7."}]}`
	// fake-large: 2 micro-dollars an input token (a body's byte), 8 an output token.
	worst := int64(len(body))*2 + 1000*8
	const n, fits = 5, 3
	w.budget(t, "shop", fits*worst+worst/2)
	answers := make(chan stormAnswer, n)
	for i := range n {
		go func() { answers <- w.stormPost("shop", "storm-"+strconv.Itoa(i), body) }()
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
	// A call let through after the others were decided would show here.
	select {
	case <-w.openai.arrived:
		arrived++
	case <-time.After(300 * time.Millisecond):
	}
	w.openai.open()
	if arrived > fits {
		t.Errorf("%d of %d concurrent calls reached the provider, each with a worst case of %d micro-dollars against %d left; want at most %d",
			arrived, n, worst, fits*worst+worst/2, fits)
	}
	for _, a := range refused {
		retry, _ := strconv.Atoi(a.retry)
		if a.status != http.StatusTooManyRequests || !strings.Contains(a.body, llm.ReasonBudgetHeld) {
			t.Errorf("a call the leftover cannot pay once the others hold it: %d %.300s; want 429 %s", a.status, a.body, llm.ReasonBudgetHeld)
			continue
		}
		if retry < 1 || retry > int(budgetRefresh/time.Second) {
			t.Errorf("Retry-After %q, want a few seconds: the hold goes when the calls in flight end", a.retry)
		}
		for _, want := range []string{"held by your tenant's calls in flight", "nothing of it was sent"} {
			if !strings.Contains(a.body, want) {
				t.Errorf("the refusal does not say %q: %s", want, a.body)
			}
		}
	}
	if got := w.refusedCount(t, "shop"); got != n-arrived {
		t.Errorf("%d refused requests recorded, want %d", got, n-arrived)
	}
	for range n - len(refused) {
		if a := <-answers; a.status != http.StatusOK {
			t.Errorf("a call admitted within the leftover: %d %.300s", a.status, a.body)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.gw.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	// What the three cost leaves room for a call of half the cap, which did not fit beside
	// their worst cases while they ran: their holds went when they ended.
	small := strings.Replace(body, `"max_completion_tokens":1000`, `"max_completion_tokens":500`, 1)
	if a := w.stormPost("shop", "after-storm", small); a.status != http.StatusOK {
		t.Errorf("a call once the calls in flight ended: %d %.300s; want it sent", a.status, a.body)
	}
}
