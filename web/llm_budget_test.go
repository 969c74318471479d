package web_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	anthropicup "github.com/settle-dev/settle/ops/anthropic"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	openaiup "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/web"
)

// countedSpends is the database's SpendStore, counting the statements that read a spend.
type countedSpends struct {
	llm.SpendStore
	reads atomic.Int32
}

func (c *countedSpends) LLMSpend(ctx context.Context, tenantID int64, since time.Time, currency string) (int64, int64, error) {
	c.reads.Add(1)
	return c.SpendStore.LLMSpend(ctx, tenantID, since, currency)
}

// budgetWorld is the gateway wired for real with tenant budgets: Postgres, web.Server over
// loopback, the fake LLM and the fake Anthropic each behind a holdGate that counts what
// reaches them, the ledger on a manual clock, and the official SDKs in front.
type budgetWorld struct {
	tw           *testworld.World
	fake         *fake.LLM
	clock        *ops.ManualClock
	url          string
	openai, anth *holdGate
	spends       *countedSpends
	gw           *llm.Gateway
	tokens       map[string]string
	tenants      map[string]*ops.Tenant
}

// budgetRefresh is how long the gateway trusts a spend it read.
const budgetRefresh = 5 * time.Second

func newBudgetWorld(t *testing.T, tenants ...string) *budgetWorld {
	t.Helper()
	return newPricedBudgetWorld(t, llm.DefaultPrices(), tenants...)
}

// newPricedBudgetWorld is newBudgetWorld with the gateway, its budgets and the tenants page
// counting in prices' currency.
func newPricedBudgetWorld(t *testing.T, prices *llm.PriceTable, tenants ...string) *budgetWorld {
	t.Helper()
	s, tw := newServer(t)
	w := &budgetWorld{tw: tw, clock: ops.NewManualClock(time.Now()), tokens: map[string]string{}, tenants: map[string]*ops.Tenant{},
		spends: &countedSpends{SpendStore: tw.DB}}
	fakeLLM, base := tw.LLM(fake.LLMOptions{Seed: 1})
	w.fake = fakeLLM
	w.openai = newHoldGate(t, base)
	claude := fake.NewAnthropic(fake.AnthropicOptions{ChunkDelay: time.Millisecond, Words: 12})
	abase, err := claude.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = claude.Close() })
	w.anth = newHoldGate(t, abase)
	aup, err := anthropicup.New(anthropicup.Config{BaseURL: w.anth.url, APIKey: upstreamKey, AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The dashboard's tenants page reads the day of the gateway's clock, in its prices' currency.
	s.Clock = w.clock
	s.TenantsDeps = web.TenantsDeps{Tenants: tw.DB, LLMCurrency: prices.Currency}
	gw, err := llm.New(llm.Config{Ledger: tw.GatewayLedger(w.clock, 0), Prices: prices, Refs: tw.DB, Streams: tw.DB,
		Upstream:  tw.Upstream(w.openai.url, openaiup.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"}),
		Upstreams: map[string]llm.Upstream{llm.MessagesRoute: aup},
		Budgets:   llm.NewBudgets(w.spends, prices, w.clock, budgetRefresh)})
	if err != nil {
		t.Fatal(err)
	}
	s.LLM, w.gw = gw, gw
	w.url = tw.Serve(s.Handler())
	for _, name := range tenants {
		w.tenants[name] = tw.Tenant(name)
		w.tokens[name] = tw.Token(w.tenants[name], "test")
	}
	return w
}

// budget sets a tenant's budget per day in micro-dollars, as 'settle tenant budget' stores it.
func (w *budgetWorld) budget(t *testing.T, tenant string, micros int64) {
	t.Helper()
	if _, err := w.tw.DB.Pool.Exec(context.Background(), `UPDATE tenants SET llm_budget_micros = $2 WHERE name = $1`, tenant, micros); err != nil {
		t.Fatal(err)
	}
}

// dollar is a budget a day that pays for any one call of these tests. A call is admitted
// only while its worst case fits what is left, so no call spends a budget whole: a test
// makes a spent budget by lowering it to what the tenant's calls cost (spendAll), as an
// admin may.
const dollar = 1_000_000

// spendAll lowers the tenant's budget to what its calls cost so far (at least a
// micro-dollar): its spend of the day reached its budget. Its calls must have closed.
func (w *budgetWorld) spendAll(t *testing.T, tenant string) {
	t.Helper()
	var spent int64
	if err := w.tw.DB.Pool.QueryRow(context.Background(), `SELECT greatest(coalesce(sum(cost_micros), 0), 1) FROM operations WHERE tenant_id = $1`,
		w.tenants[tenant].ID).Scan(&spent); err != nil {
		t.Fatal(err)
	}
	w.budget(t, tenant, spent)
}

// leave sets the tenant's budget to what its calls cost so far and micros more, once their
// closes are written, and moves the clock past the refresh so that the gateway reads it:
// micros are what is left.
func (w *budgetWorld) leave(t *testing.T, tenant string, micros int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.gw.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	var spent int64
	if err := w.tw.DB.Pool.QueryRow(ctx, `SELECT coalesce(sum(cost_micros), 0) FROM operations WHERE tenant_id = $1`,
		w.tenants[tenant].ID).Scan(&spent); err != nil {
		t.Fatal(err)
	}
	w.budget(t, tenant, spent+micros)
	w.clock.Advance(budgetRefresh)
}

func (w *budgetWorld) posts() int32 { return w.openai.posts.Load() + w.anth.posts.Load() }

// budgetCall is one paid call of a gateway route through its official SDK, without the
// SDK's own retries: its error, and whether it was answered as a replay.
type budgetCall func(w *budgetWorld, tenant, key string) (replayed bool, err error)

func budgetChat(w *budgetWorld, tenant, key string) (bool, error) {
	var raw *http.Response
	c := openai.NewClient(option.WithBaseURL(w.url+"/v1/"), option.WithAPIKey(w.tokens[tenant]), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(context.Background(), ask("where is order 4417?", 0), keyed(key), option.WithResponseInto(&raw))
	return raw != nil && raw.Header.Get("Idempotent-Replayed") == "true", err
}

func budgetResponses(w *budgetWorld, tenant, key string) (bool, error) {
	var raw *http.Response
	c := openai.NewClient(option.WithBaseURL(w.url+"/v1/"), option.WithAPIKey(w.tokens[tenant]), option.WithMaxRetries(0))
	_, err := c.Responses.New(context.Background(), respond("where is order 4417?", "answer as support"), keyed(key), option.WithResponseInto(&raw))
	return raw != nil && raw.Header.Get("Idempotent-Replayed") == "true", err
}

func budgetEmbeddings(w *budgetWorld, tenant, key string) (bool, error) {
	var raw *http.Response
	c := openai.NewClient(option.WithBaseURL(w.url+"/v1/"), option.WithAPIKey(w.tokens[tenant]), option.WithMaxRetries(0))
	_, err := c.Embeddings.New(context.Background(), embed(256), keyed(key), option.WithResponseInto(&raw))
	return raw != nil && raw.Header.Get("Idempotent-Replayed") == "true", err
}

func budgetMessages(w *budgetWorld, tenant, key string) (bool, error) {
	var raw *http.Response
	c := anthropic.NewClient(aoption.WithBaseURL(w.url), aoption.WithAPIKey(w.tokens[tenant]), aoption.WithMaxRetries(0))
	_, err := c.Messages.New(context.Background(), claudeAsk("where is order 4417?"),
		aoption.WithHeader("Idempotency-Key", key), aoption.WithResponseInto(&raw))
	return raw != nil && raw.Header.Get("Idempotent-Replayed") == "true", err
}

// refusedAnswer is the status and body of an SDK's error.
func refusedAnswer(err error) (int, string) {
	var oe *openai.Error
	if errors.As(err, &oe) {
		return oe.StatusCode, string(oe.DumpResponse(true))
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return ae.StatusCode, string(ae.DumpResponse(true))
	}
	return 0, ""
}

var budgetRoutes = []struct {
	name   string
	tenant string
	call   budgetCall
}{
	{"chat completions", "chat", budgetChat},
	{"responses", "resp", budgetResponses},
	{"embeddings", "embed", budgetEmbeddings},
	{"messages", "claude", budgetMessages},
}

// TestATenantPastItsLLMBudgetSendsNothingMore is the attack of a tenant running up the shared
// provider bill: once its spend of the day reached its budget, a new call on every paid
// route of the gateway is refused with 429 tenant_budget_spent, naming the budget and when
// it resets, is recorded as the tenant's refused request (ops rule 8), and reaches no
// provider. A retry of a key whose call already ran is still answered from its stored
// result and sends nothing (ops rules 1 and 2: a replay costs nothing).
func TestATenantPastItsLLMBudgetSendsNothingMore(t *testing.T) {
	t.Parallel()
	names := []string{}
	for _, r := range budgetRoutes {
		names = append(names, r.tenant)
	}
	w := newBudgetWorld(t, names...)
	for _, r := range budgetRoutes {
		w.budget(t, r.tenant, dollar)
	}
	for _, r := range budgetRoutes {
		t.Run(r.name, func(t *testing.T) {
			first := r.tenant + "-first"
			if _, err := r.call(w, r.tenant, first); err != nil {
				t.Fatalf("the first call, within the budget: %v", err)
			}
			// A call may answer its client before its close, which records the cost, is written.
			w.tw.WaitStatus(t, first, ops.StatusSucceeded, 10*time.Second)
			w.spendAll(t, r.tenant)
			// Every replica reads the spend again within budgetRefresh.
			w.clock.Advance(budgetRefresh + time.Second)
			sent := w.posts()
			_, err := r.call(w, r.tenant, r.tenant+"-second")
			status, body := refusedAnswer(err)
			if status != http.StatusTooManyRequests || !strings.Contains(body, llm.ReasonBudgetSpent) ||
				!strings.Contains(body, "budget of") || !strings.Contains(body, "resets at") {
				t.Errorf("a call past the budget: %v %d %s; want 429 %s naming the budget and its reset", err, status, body, llm.ReasonBudgetSpent)
			}
			if got := w.posts() - sent; got != 0 {
				t.Errorf("a call past the budget sent %d requests to the provider, want none", got)
			}
			replayed, err := r.call(w, r.tenant, first)
			if err != nil || !replayed {
				t.Errorf("the retry of a key that ran: replayed %v, %v; want its stored answer", replayed, err)
			}
			if got := w.posts() - sent; got != 0 {
				t.Errorf("the refusal and the replay sent %d requests to the provider, want none", got)
			}
			if n := w.tw.Count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND answer = 'rejected'`, w.tenants[r.tenant].ID); n != 1 {
				t.Errorf("%d refused requests recorded for the tenant, want 1", n)
			}
		})
	}
}

// TestLLMBudgetIsPerTenantAndPerUTCDay defends ops rule 8's refusal of a tenant past its
// budget from reaching anyone else: a tenant without a budget is never checked (no statement
// reads a spend for it), a tenant within its budget is served, the spent tenant's refusal
// stops none of them, and the spent tenant is served again once the UTC day ends. The spend
// is read once per refresh, not per call.
func TestLLMBudgetIsPerTenantAndPerUTCDay(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop", "bank", "rich")
	w.budget(t, "shop", dollar)
	w.budget(t, "rich", 1_000_000_000)
	served := func(tenant, key string) {
		t.Helper()
		sent := w.posts()
		if _, err := budgetChat(w, tenant, key); err != nil {
			t.Fatalf("%s's call %s: %v, want it served", tenant, key, err)
		}
		if w.posts() == sent {
			t.Fatalf("%s's call %s reached no provider", tenant, key)
		}
		w.tw.WaitStatus(t, key, ops.StatusSucceeded, 10*time.Second)
	}
	for _, key := range []string{"bank-1", "bank-2", "bank-3"} {
		served("bank", key)
	}
	if n := w.spends.reads.Load(); n != 0 {
		t.Fatalf("calls of a tenant without a budget read its spend %d times, want never", n)
	}
	served("shop", "shop-1")
	w.spendAll(t, "shop")
	served("rich", "rich-1")
	reads := w.spends.reads.Load()
	served("rich", "rich-2")
	if n := w.spends.reads.Load(); n != reads {
		t.Errorf("a call within the refresh read the spend again (%d reads, want %d)", n, reads)
	}
	w.clock.Advance(budgetRefresh + time.Second)
	_, err := budgetChat(w, "shop", "shop-2")
	if status, body := refusedAnswer(err); status != http.StatusTooManyRequests || !strings.Contains(body, llm.ReasonBudgetSpent) {
		t.Fatalf("shop past its budget: %v; want 429 %s", err, llm.ReasonBudgetSpent)
	}
	served("bank", "bank-4")
	served("rich", "rich-3")
	// The next UTC day: the budget is whole again.
	now := w.clock.Now().UTC()
	w.clock.Set(now.Truncate(24 * time.Hour).Add(24*time.Hour + time.Second))
	served("shop", "shop-3")
}

// TestAResendPastTheBudgetSendsNothing is the attack of a tenant that parks calls before its
// budget is spent and resends them after: an operation admitted within the budget whose
// attempts the provider refused (nothing billed) stays open, and the client's retry with its
// key would make the provider generate it, a new paid call, past the budget. The resend is
// refused with 429 tenant_budget_spent, recorded as the tenant's refused request
// (ops rule 8), and sends nothing; the operation stays open for its key (ops rule 11), and
// the refusal does not say the call sent nothing, since its earlier attempts were sent
// (ops rule 12).
func TestAResendPastTheBudgetSendsNothing(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop")
	w.budget(t, "shop", dollar)
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultOverloaded, Times: 3})
	if _, err := budgetChat(w, "shop", "parked"); err == nil {
		t.Fatal("a call the provider refused three times was answered")
	}
	if op := w.tw.Operation(t, "parked"); op.Status != ops.StatusInProgress {
		t.Fatalf("the refused call's operation is %s, want in_progress", op.Status)
	}
	if _, err := budgetChat(w, "shop", "spend"); err != nil {
		t.Fatalf("the call within the budget: %v", err)
	}
	w.tw.WaitStatus(t, "spend", ops.StatusSucceeded, 10*time.Second)
	w.spendAll(t, "shop")
	w.clock.Advance(budgetRefresh + time.Second)
	sent := w.posts()
	_, err := budgetChat(w, "shop", "parked")
	if status, body := refusedAnswer(err); status != http.StatusTooManyRequests || !strings.Contains(body, llm.ReasonBudgetSpent) {
		t.Errorf("the resend past the budget: %v %d %s; want 429 %s", err, status, body, llm.ReasonBudgetSpent)
	} else if op := w.tw.Operation(t, "parked"); strings.Contains(body, "nothing of it was sent") || !strings.Contains(body, op.ID) {
		// Its earlier attempts were sent: the refusal of this one may not say the call sent
		// nothing (ops rule 12), and names the operation that stays open.
		t.Errorf("the resend's refusal says more than Settle knows, or not which operation stays open: %s", body)
	}
	if got := w.posts() - sent; got != 0 {
		t.Errorf("the resend past the budget sent %d requests to the provider, want none", got)
	}
	if op := w.tw.Operation(t, "parked"); op.Status != ops.StatusInProgress {
		t.Errorf("the refused resend left its operation %s, want it open (in_progress)", op.Status)
	}
	if n := w.tw.Count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND answer = 'rejected'`, w.tenants["shop"].ID); n != 1 {
		t.Errorf("%d refused requests recorded for the tenant, want 1", n)
	}
}

// TestABudgetedTenantCannotCallAModelTheTableDoesNotPrice is the attack of a tenant that
// spends past its budget on a model the price table does not price: such a call's cost is
// counted as nothing, so every one of them would pass the cap. For a tenant with a budget a
// new call of an unpriced model is refused before anything is sent, naming the model,
// recorded as the tenant's refused request (ops rule 8); a tenant without a budget, whose
// calls nothing caps, still calls it.
func TestABudgetedTenantCannotCallAModelTheTableDoesNotPrice(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop", "bank")
	w.budget(t, "shop", 1_000_000)
	call := func(tenant, key string) error {
		c := openai.NewClient(option.WithBaseURL(w.url+"/v1/"), option.WithAPIKey(w.tokens[tenant]), option.WithMaxRetries(0))
		p := ask("where is order 4417?", 0)
		p.Model = "fake-unpriced"
		_, err := c.Chat.Completions.New(context.Background(), p, keyed(key))
		return err
	}
	sent := w.posts()
	err := call("shop", "unpriced")
	status, body := refusedAnswer(err)
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, llm.ReasonModelNotPriced) || !strings.Contains(body, "fake-unpriced") {
		t.Errorf("a budgeted tenant's call of an unpriced model: %v %d %s; want 422 %s naming the model", err, status, body, llm.ReasonModelNotPriced)
	}
	if got := w.posts() - sent; got != 0 {
		t.Errorf("the refused call sent %d requests to the provider, want none", got)
	}
	if n := w.tw.Count(t, `SELECT count(*) FROM client_requests WHERE tenant_id = $1 AND answer = 'rejected'`, w.tenants["shop"].ID); n != 1 {
		t.Errorf("%d refused requests recorded for the tenant, want 1", n)
	}
	if err := call("bank", "unpriced"); err != nil {
		t.Errorf("a tenant without a budget calling an unpriced model: %v, want it served", err)
	}
}
