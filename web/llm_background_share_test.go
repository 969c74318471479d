package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	openaiup "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/web"
)

// bgBody is a Responses API call in background mode.
const bgBody = `{"model":"fake-small","input":"where is order 4417?","background":true}`

// bgShareWorld is the gateway wired for real with tenant budgets and, where asked, a share of
// the places in flight per tenant: Postgres, web.Server over loopback, and the fake LLM behind
// a followGate, which holds the gateway's follow of every background response while shut.
// shop has an LLM budget, bank none.
type bgShareWorld struct {
	tw      *testworld.World
	server  *web.Server
	fake    *fake.LLM
	gate    *followGate
	clock   *ops.ManualClock
	url     string
	tokens  map[string]string
	tenants map[string]*ops.Tenant
}

// newBGShareWorld sets the world up with share places per tenant (0: no share) and the
// provider's attempt timeout (0: the adapter's default), which bounds each read of a follow.
func newBGShareWorld(t *testing.T, share int, attemptTimeout time.Duration) *bgShareWorld {
	t.Helper()
	s, tw := newServer(t)
	w := &bgShareWorld{tw: tw, server: s, clock: ops.NewManualClock(time.Now()), tokens: map[string]string{}, tenants: map[string]*ops.Tenant{}}
	var base string
	w.fake, base = tw.LLM(fake.LLMOptions{Seed: 1})
	w.gate = newFollowGate(t, base)
	prices := llm.DefaultPrices()
	gw, err := llm.New(llm.Config{Ledger: tw.GatewayLedger(w.clock, 0), Prices: prices, Refs: tw.DB, Streams: tw.DB,
		Upstream: tw.Upstream(w.gate.url, openaiup.Config{Name: "fake-llm", APIKey: "sk-settle-upstream", AttemptTimeout: attemptTimeout}),
		Budgets:  llm.NewBudgets(tw.DB, prices, w.clock, budgetRefresh)})
	if err != nil {
		t.Fatal(err)
	}
	s.LLM = gw
	if share > 0 {
		s.MaxInFlight, s.MaxInFlightPerTenant = 100, share
	}
	w.url = tw.Serve(s.Handler())
	// Cleanups run last first: the held follows go on, and a response the provider holds
	// ends, before the server closes and waits for them.
	t.Cleanup(func() { _ = w.fake.Close() })
	t.Cleanup(w.gate.let)
	for _, name := range []string{"shop", "bank"} {
		w.tenants[name] = tw.Tenant(name)
		w.tokens[name] = tw.Token(w.tenants[name], "test")
	}
	return w
}

// budget sets a tenant's LLM budget per day in micro-dollars.
func (w *bgShareWorld) budget(t *testing.T, tenant string, micros int64) {
	t.Helper()
	if _, err := w.tw.DB.Pool.Exec(context.Background(), `UPDATE tenants SET llm_budget_micros = $2 WHERE name = $1`, tenant, micros); err != nil {
		t.Fatal(err)
	}
}

// do sends body to path as tenant with Idempotency-Key key ("" sends none) on plain net/http,
// and returns the answer with its body read.
func (w *bgShareWorld) do(t *testing.T, tenant, method, path, key, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, w.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.tokens[tenant])
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// created sends a background response of tenant under key and returns the id of the
// response the client was answered with; it fails unless the answer is 200 with a response
// the provider still runs (queued or in_progress).
func (w *bgShareWorld) created(t *testing.T, tenant, key string) string {
	t.Helper()
	resp, body := w.do(t, tenant, http.MethodPost, "/v1/responses", key, bgBody)
	var r struct{ ID, Status string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &r) != nil || (r.Status != "queued" && r.Status != "in_progress") {
		t.Fatalf("%s's background response %s: %d %.300s; want 200 with the response running", tenant, key, resp.StatusCode, body)
	}
	return r.ID
}

// responses counts the generations of the Responses API the provider billed.
func (w *bgShareWorld) responses() int { return len(w.fake.GenerationsOf(fake.APIResponses)) }

// rejected counts tenant's client requests recorded as rejected.
func (w *bgShareWorld) rejected(t *testing.T, tenant string) int {
	t.Helper()
	return w.tw.Count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND answer = 'rejected'`, w.tenants[tenant].ID)
}

// TestBackgroundResponsesHoldTheirTenantsShareUntilTheirFollowEnds is the attack of a tenant
// that starts background responses faster than they run: each is answered at once with the
// queued response while the gateway follows it at the provider, and only its end writes its
// cost, so without a bound a budgeted tenant could have any number generating before its
// spend shows any of them. A background response holds its place in its tenant's share until
// its follow ends, for a tenant with a budget and one without: beyond the share, a call is
// refused with 429 tenant_busy, recorded as the tenant's refused request, counted by the
// share's metric, and nothing of it is sent (ops rule 8). The places the follows hold are
// lent to what starts no generation: a read of a response, a cancel, a retry of a key being
// followed (answered from the provider's response, no second place, no second generation);
// a new call let in on such a place is refused as the share refuses it. Once the responses
// end, every place is free again, and none twice.
func TestBackgroundResponsesHoldTheirTenantsShareUntilTheirFollowEnds(t *testing.T) {
	t.Parallel()
	const share = 2
	w := newBGShareWorld(t, share, 0)
	w.budget(t, "shop", 1_000_000_000)
	// A chat call the provider refused three times stays open for its key's retry.
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultOverloaded, Path: "/v1/chat/completions", Times: 3})
	if resp, body := w.do(t, "shop", http.MethodPost, "/v1/chat/completions", "parked", chatBody("parked", 0, false)); resp.StatusCode == http.StatusOK {
		t.Fatalf("a call the provider refused three times was answered: %.300s", body)
	}
	w.gate.shut()
	ids := map[string][]string{}
	for _, tenant := range []string{"shop", "bank"} {
		for i := range share {
			ids[tenant] = append(ids[tenant], w.created(t, tenant, fmt.Sprintf("%s-%d", tenant, i)))
		}
		for i := share; i < share+2; i++ {
			resp, body := w.do(t, tenant, http.MethodPost, "/v1/responses", fmt.Sprintf("%s-%d", tenant, i), bgBody)
			wantTenantBusy(t, tenant+"'s background response beyond its share", resp, body)
		}
		// ops rule 8
		if n := w.rejected(t, tenant); n != 2 {
			t.Errorf("%s's background responses refused beyond its share recorded as %d rejected requests, want 2", tenant, n)
		}
	}
	if n := w.responses(); n != 2*share {
		t.Fatalf("the provider generated %d responses while the follows were held, want %d: the share's places held none back", n, 2*share)
	}

	// What starts no generation is served on the places the follows hold.
	if resp, body := w.do(t, "shop", http.MethodGet, "/v1/responses/"+ids["shop"][0], "", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET of a running background response with the share held by follows: %d %.300s, want 200", resp.StatusCode, body)
	}
	resp, body := w.do(t, "shop", http.MethodPost, "/v1/responses", "shop-0", bgBody)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Idempotent-Replayed") != "true" || !strings.Contains(body, ids["shop"][0]) {
		t.Errorf("a retry of a key being followed with the share held: %d replayed %q %.300s; want its response, replayed",
			resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), body)
	}
	if resp, body := w.do(t, "bank", http.MethodPost, "/v1/responses/"+ids["bank"][1]+"/cancel", "", ""); resp.StatusCode == http.StatusTooManyRequests {
		t.Errorf("a cancel of a running background response with the share held by follows: %d %.300s, want it sent", resp.StatusCode, body)
	}
	if got := w.fake.Cancels(); len(got) != 1 || got[0] != ids["bank"][1] {
		t.Errorf("the provider was asked to cancel %v, want %s", got, ids["bank"][1])
	}
	// A new call let in on a lent place is refused as the share refuses, nothing sent.
	resp, body = w.do(t, "shop", http.MethodPost, "/v1/responses", "shop-new", bgBody)
	wantTenantBusy(t, "a new call on a place a follow lends", resp, body)
	// ops rule 8
	if n := w.rejected(t, "shop"); n != 3 {
		t.Errorf("shop's refused requests: %d, want 3 (the new call on a lent place among them)", n)
	}
	if got := metric(t, w.server.Registry, "settle_http_tenant_share_refused_total", map[string]string{"route": "/v1/responses", "tenant": "shop"}); got != 3 {
		t.Errorf("settle_http_tenant_share_refused_total{tenant=shop}: %v, want 3", got)
	}
	// A retry that would send an open operation again is refused too, saying that its
	// earlier attempts were sent (ops rule 12).
	resp, body = w.do(t, "shop", http.MethodPost, "/v1/chat/completions", "parked", chatBody("parked", 0, false))
	wantTenantBusy(t, "a resend on a place a follow lends", resp, body)
	parked := w.tw.Operation(t, "parked")
	sent := w.tw.Count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1 AND outcome <> 'not_sent'`, parked.ID)
	if !strings.Contains(body, parked.ID) || strings.Contains(body, "nothing of it was sent") || sent != 3 || parked.Status != ops.StatusInProgress {
		t.Errorf("the refused resend of operation %s (%s, %d attempts sent) answered %.400s; want it named, still open, no attempt more sent, and not said to have sent nothing",
			parked.ID, parked.Status, sent, body)
	}
	// ops rule 8
	if n := w.rejected(t, "shop"); n != 4 {
		t.Errorf("shop's refused requests: %d, want 4 (the refused resend among them)", n)
	}
	if n := w.responses(); n != 2*share {
		t.Errorf("the reads, the retry and the refused call made the provider generate %d responses, want %d", n, 2*share)
	}
	if n := w.tw.Count(t, `SELECT count(*) FROM operations`); n != 2*share+1 {
		t.Errorf("%d operations, want the %d followed responses' and the parked call's only", n, 2*share)
	}

	// The follows end: every place is free again, once.
	w.gate.let()
	for _, key := range []string{"shop-0", "shop-1", "bank-0"} {
		w.tw.WaitStatus(t, key, ops.StatusSucceeded, 15*time.Second)
	}
	w.wantShareFree(t, "shop", share)
	w.wantShareFree(t, "bank", share)
}

// wantShareFree checks that tenant holds no place: with the follows held again, it starts
// exactly share background responses and the next is refused, so no place leaked and none
// was released twice. It waits for the follows that ended to let go of their requests.
func (w *bgShareWorld) wantShareFree(t *testing.T, tenant string, share int) {
	t.Helper()
	w.gate.shut()
	defer w.gate.let()
	for i := range share {
		key := fmt.Sprintf("%s-again-%d", tenant, i)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			resp, body := w.do(t, tenant, http.MethodPost, "/v1/responses", key, bgBody)
			if resp.StatusCode == http.StatusOK {
				break
			}
			if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
				t.Fatalf("%s's background response once its follows ended: %d %.300s", tenant, resp.StatusCode, body)
			}
		}
	}
	resp, body := w.do(t, tenant, http.MethodPost, "/v1/responses", tenant+"-again-over", bgBody)
	wantTenantBusy(t, tenant+"'s call beyond its share once its places were freed", resp, body)
}

// TestARetryOfARunningBackgroundResponseIsNotRefusedByTheBudget: a budgeted tenant's
// background response still runs at the provider when the tenant's budget is spent; a retry
// with its key sends nothing new (it follows or answers the response already created), so it
// is answered, not refused with tenant_budget_spent, whether the first request still follows
// the response or its follow gave up (the provider's stream reads timed out). The provider
// generates the response once (ops rule 3), and no refusal is recorded (ops rule 8). A
// follow that gave up frees its place in the share.
func TestARetryOfARunningBackgroundResponseIsNotRefusedByTheBudget(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		share   int
		timeout time.Duration
	}{{"while it is followed", 2, 0}, {"after its follow gave up", 1, 300 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newBGShareWorld(t, c.share, c.timeout)
			w.budget(t, "shop", dollar)
			w.gate.shut()
			// The provider holds the response queued for the whole test.
			w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Path: "/v1/responses", Times: 1, Delay: time.Minute})
			id := w.created(t, "shop", "bg")
			// With a share of one, the call that spends the budget is served only once the
			// follow gave up and freed its place.
			w.spend(t, "shop")
			refused := w.rejected(t, "shop")
			resp, body := w.do(t, "shop", http.MethodPost, "/v1/responses", "bg", bgBody)
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, id) {
				t.Errorf("the retry of a running background response past the budget: %d %.400s; want the response %s", resp.StatusCode, body, id)
			}
			// ops rule 3
			if n := len(w.fake.GenerationsOf(fake.APIResponses)); n != 1 {
				t.Errorf("the provider generated %d responses, want 1", n)
			}
			// ops rule 8
			if n := w.rejected(t, "shop"); n != refused {
				t.Errorf("the retry was recorded as refused (%d refused requests, want %d)", n, refused)
			}
		})
	}
}

// spend spends tenant's budget with a chat completion (sent again while the tenant's share
// is taken, for 10 s at most) and moves the clock past the refresh, and checks that a new
// call is then refused with tenant_budget_spent.
func (w *bgShareWorld) spend(t *testing.T, tenant string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, body := w.do(t, tenant, http.MethodPost, "/v1/chat/completions", tenant+"-spend", chatBody("spend it", 0, false))
		if resp.StatusCode == http.StatusOK {
			break
		}
		if !strings.Contains(body, web.ReasonTenantBusy) || time.Now().After(deadline) {
			t.Fatalf("the call that spends the budget: %d %.300s", resp.StatusCode, body)
		}
	}
	w.tw.WaitStatus(t, tenant+"-spend", ops.StatusSucceeded, 10*time.Second)
	// No call spends a budget whole (its worst case must fit): it is lowered below the spend.
	w.budget(t, tenant, 1)
	w.clock.Advance(budgetRefresh + time.Second)
	resp, body := w.do(t, tenant, http.MethodPost, "/v1/chat/completions", tenant+"-past", chatBody("one more", 0, false))
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, llm.ReasonBudgetSpent) {
		t.Fatalf("a new call past the budget: %d %.300s; want 429 %s", resp.StatusCode, body, llm.ReasonBudgetSpent)
	}
}
