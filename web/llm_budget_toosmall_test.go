package web_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/alerts/alertstest"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/alertstore"
)

// tooSmallMetric counts the calls refused because what is left of their tenant's budget
// cannot pay for their worst case.
const tooSmallMetric = "settle_llm_budget_too_small_total"

// metricLines scrapes /metrics and returns the lines of metric's series.
func (w *budgetWorld) metricLines(t *testing.T, metric string) []string {
	t.Helper()
	resp, err := http.Get(w.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, metric+"{") {
			out = append(out, line)
		}
	}
	return out
}

// TestATenantStoppedByWhatIsLeftOfItsBudgetIsSeen is the attack of a tenant with a cent left
// of its budget whose every call names 100,000 tokens of the dearest model: each is refused
// with 429 llm_budget_too_small, so its customers are as stopped as a spent budget's, and
// nobody is told. Through the real gateway, shop's three calls are refused so; bank sends
// one such call, then two that fit, which are sent. The refusals count on /metrics under a
// series of their own, settle_llm_budget_too_small_total, by tenant, API and caller (the
// spent budget's counter keeps its meaning: no series); the built-in TenantLLMBudgetSpent
// fires for shop alone, with reason llm_budget_too_small and a summary that says what is left
// is too small for its calls, while bank's one refusal among admitted calls pages nobody
// (more than half of a tenant's requests in the window, and at least 3, must be refused), and
// the alert resolves once shop's refusals have left the window and keep_firing_for; and
// /tenants shows shop refused, saying what is left, and bank within its budget.
// ops rule 8
func TestATenantStoppedByWhatIsLeftOfItsBudgetIsSeen(t *testing.T) {
	t.Parallel()
	w := newBudgetWorld(t, "shop", "bank")
	w.budget(t, "shop", 10_000) // a cent
	w.budget(t, "bank", 10_000)
	big, small := capChat(`"max_completion_tokens":100000`), capChat(`"max_completion_tokens":200`)
	for i := range 3 {
		if status, _, body := w.capPost(t, "shop", "/v1/chat/completions", "shop-big-"+strconv.Itoa(i), big); status != http.StatusTooManyRequests ||
			!strings.Contains(body, reasonTooSmall) {
			t.Fatalf("shop's call past what is left: %d %.300s; want 429 %s", status, body, reasonTooSmall)
		}
	}
	if status, _, body := w.capPost(t, "bank", "/v1/chat/completions", "bank-big", big); status != http.StatusTooManyRequests {
		t.Fatalf("bank's oversize call: %d %.300s; want 429 %s", status, body, reasonTooSmall)
	}
	for _, key := range []string{"bank-small-1", "bank-small-2"} {
		if status, _, body := w.capPost(t, "bank", "/v1/chat/completions", key, small); status != http.StatusOK {
			t.Fatalf("bank's call that fits: %d %.300s; want it sent", status, body)
		}
	}

	want := []string{
		tooSmallMetric + `{api="chat_completions",caller="gateway",tenant="bank"} 1`,
		tooSmallMetric + `{api="chat_completions",caller="gateway",tenant="shop"} 3`,
	}
	if got := w.metricLines(t, tooSmallMetric); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the too-small refusals on /metrics:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := w.metricLines(t, budgetRefusedMetric); len(got) != 0 {
		t.Errorf("the spent budgets' counter counts the too-small refusals: %v", got)
	}

	as := alertstore.New(w.tw.DB)
	ev := &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: as, Store: as, Clock: w.clock}
	w.clock.Advance(time.Second)
	if _, err := ev.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := budgetAlerts(t, as)
	if len(got) != 1 || !strings.Contains(got["shop"], "too small") {
		t.Errorf("TenantLLMBudgetSpent after the refusals: %v; want it firing for shop alone, saying what is left is too small", got)
	}
	for _, in := range alertstest.Firing(t, as, alertstest.BudgetAlert) {
		if in.Labels["reason"] != llm.ReasonBudgetTooSmall || in.Labels["kind"] != "llm_call" {
			t.Errorf("TenantLLMBudgetSpent for shop is labelled %v; want reason %s, kind llm_call", in.Labels, llm.ReasonBudgetTooSmall)
		}
	}

	e := &dashEnv{env: &env{db: w.tw.DB, url: w.url}}
	manager := e.signIn(t, "manager@example.com", desk.RoleManager)
	code, body := e.page(t, manager, "/tenants")
	if code != http.StatusOK {
		t.Fatalf("manager GET /tenants = %d", code)
	}
	body = html.UnescapeString(body)
	if row := tenantRowOf(t, body, "shop"); !strings.Contains(row, `data-testid="tenant-too-small"`) || !strings.Contains(row, "0.01 USD left") {
		t.Errorf("shop's row does not show it refused for what is left of its budget:\n%s", row)
	}
	if row := tenantRowOf(t, body, "bank"); strings.Contains(row, `data-testid="tenant-too-small"`) || !strings.Contains(row, "within budget") {
		t.Errorf("bank's row shows it refused for one oversize call among calls sent:\n%s", row)
	}

	// A pass a minute, as the evaluator runs: the refusals leave the 2-minute window
	// after the pass of minute 1, and keep_firing_for holds the alert 10 minutes past it.
	for minute := 1; minute <= 11; minute++ {
		w.clock.Advance(time.Minute)
		if _, err := ev.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := budgetAlerts(t, as)
		if minute < 11 && (len(got) != 1 || got["shop"] == "") {
			t.Fatalf("TenantLLMBudgetSpent %d minutes after shop's last refusal: %v; want it still firing for shop alone", minute, got)
		}
		if minute == 11 && len(got) != 0 {
			t.Fatalf("TenantLLMBudgetSpent 11 minutes after shop's last refusal: %v; want it resolved", got)
		}
	}
}

// TestThePageAndTheRuleJudgeWhatIsLeftAlike: the tenants page shows a tenant refused for
// what is left of its budget on the counts, window and share that the built-in rule of
// reason llm_budget_too_small judges (ops rule 8 records each refusal with its reason), so
// that support sees the tenant on-call is told of, and no other.
// ops rule 8
func TestThePageAndTheRuleJudgeWhatIsLeftAlike(t *testing.T) {
	t.Parallel()
	var found int
	for _, r := range alerts.DefaultRules().Rules() {
		if r.Alert != alertstest.BudgetAlert || r.Labels["reason"] != llm.ReasonBudgetTooSmall {
			continue
		}
		found++
		x := r.Expr
		if x.Form != alerts.FormRatio || x.Numerator != alerts.BudgetTooSmall || x.Denominator != alerts.ClientRequests ||
			x.Window != llm.TooSmallWindow || x.Threshold != 0.5 || x.MinRequests != llm.TooSmallMinRequests ||
			!reflect.DeepEqual(x.By, []string{alerts.LabelTenant, alerts.LabelKind}) {
			t.Errorf("the rule judges %+v; the page judges more than half of at least %d requests of a tenant and kind in %s",
				x, llm.TooSmallMinRequests, llm.TooSmallWindow)
		}
	}
	if found != 1 {
		t.Fatalf("%d built-in rules of reason %s, want 1", found, llm.ReasonBudgetTooSmall)
	}
	for _, c := range []struct {
		requests, refused int64
		stopped           bool
	}{{1, 1, false}, {2, 2, false}, {3, 3, true}, {3, 1, false}, {4, 2, false}, {5, 3, true}} {
		if got := llm.StoppedByWhatIsLeft(c.requests, c.refused); got != c.stopped {
			t.Errorf("%d refused of %d requests: stopped %v, want %v", c.refused, c.requests, got, c.stopped)
		}
	}
}

// TestTheTenantsPageSaysWhenItCouldNotCountTheTooSmallRefusals: the page's count of the
// requests refused for what is left of a budget is bounded like its read of the spend, so
// while the requests cannot be read in time (here their table is held by another
// transaction) the page still answers, and says above the table that a tenant they stop
// shows within its budget, rather than saying so of it unasked (ops rule 12).
// ops rule 12
func TestTheTenantsPageSaysWhenItCouldNotCountTheTooSmallRefusals(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	ctx := context.Background()
	if _, err := e.db.Pool.Exec(ctx, `UPDATE tenants SET llm_budget_micros = 25000000 WHERE id = $1`, e.tenant.ID); err != nil {
		t.Fatal(err)
	}
	manager := e.signIn(t, "manager@example.com", desk.RoleManager)
	manager.Timeout = 20 * time.Second
	if _, body := e.page(t, manager, "/tenants"); strings.Contains(body, `data-testid="tenants-refusals-unread"`) {
		t.Fatalf("the page says the refusals were not counted while nothing held them")
	}
	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE client_requests IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	code, body := e.page(t, manager, "/tenants")
	if code != http.StatusOK || !strings.Contains(body, `data-testid="tenants-refusals-unread"`) {
		t.Errorf("GET /tenants while the requests cannot be read = %d; want the page saying they were not counted:\n%s", code, body)
	}
}
