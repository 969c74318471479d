package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/pg/reconstore"

	"github.com/chromedp/chromedp"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/web"
)

// layoutWidths are the window widths the dashboard must fit: a laptop and a small one.
var layoutWidths = []int64{1280, 1024}

// longRef is an unbreakable reference as long as the ones real shops send; it is what
// pushes a table cell, and so the page, wider than the window.
func longRef(prefix string, i int) string {
	return fmt.Sprintf("%s-%02d-7f3c9a1e5b2d4c8f9e6a1d2b3c4d5e6f-0a1b2c3d4e5f60718293a4b5c6d7e8f9", prefix, i)
}

// seedFullDashboard fills every page: a queue of unknown refunds with long order refs, an
// LLM call, reconciliation rollups, open exceptions and evaluated alerts. It returns the
// pages that show one record.
func seedFullDashboard(t *testing.T, e *dashEnv, ev *alerts.Evaluator) (opURL, exceptionURL, drillURL string) {
	t.Helper()
	ctx := context.Background()
	seedMonth(t, e.env, e.tenant.ID)
	op := e.refundedButUnknown(t, longRef("ORDER", 0))
	for i := 1; i <= 24; i++ {
		e.notSentUnknown(t, longRef("ORDER", i))
	}
	e.llmUnknown(t, longRef("chat", 0))
	reconOp := seedReconFor(t, e.env, e.tenant.ID)
	for i := range 12 {
		ref := longRef("re", i)
		if _, _, err := reconstore.New(e.db).RecordFinding(ctx, recon.Finding{Kind: recon.ExceptionDoubleCharge, Provider: "stripe", Ref: ref,
			TenantID: e.tenant.ID, OperationID: reconOp, ChargeRefs: []string{ref, longRef("re_second", i)}, AmountCents: 3800,
			Currency: "usd", Summary: "Operation " + reconOp + " charged twice: " + ref, Actor: "stripe reconciliation", At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	// On-call looks one up, so the audit log has rows with long ids in them.
	oncall := e.signIn(t, "audit-oncall@example.com", desk.RoleOncall)
	e.post(t, oncall, "/ops/"+op.ID+"/lookup", nil)
	// Unknowns older than the rule's threshold, evaluated twice so rules pend, then fire.
	e.clock.Advance(5 * time.Hour)
	for range 2 {
		if _, err := ev.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(5 * time.Minute)
	}
	ex, err := reconstore.New(e.db).ListExceptions(ctx, recon.ExceptionFilter{Limit: 1})
	if err != nil || len(ex) == 0 {
		t.Fatalf("exceptions: %v (%d)", err, len(ex))
	}
	drill := "/reconcile/drill?at=" + t0.Add(-time.Hour).Format(time.RFC3339) + "&width=1h0m0s&tenant=" +
		strconv.FormatInt(e.tenant.ID, 10) + "&kind=refund&provider=stripe&measure=duplicates"
	return "/ops/" + op.ID, "/reconcile/exceptions/" + strconv.FormatInt(ex[0].ID, 10), drill
}

// seedMonth records a month of refunds before t0, one every three hours in dollars or
// euros, and a TimeoutRateHigh that fired for half an hour five days ago: the insights
// page's 7 and 30 days then hold a point per bucket, a band and both currencies.
func seedMonth(t *testing.T, e *env, tenant int64) {
	t.Helper()
	e.exec(t, `
WITH g AS (
	SELECT gs AS at, row_number() OVER () AS n
	FROM generate_series($2::timestamptz - interval '30 days', $2::timestamptz - interval '3 hours', interval '3 hours') gs
), ins AS (
	INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, order_ref, amount_cents,
		currency, status, provider_ref, created_at, updated_at, closed_at, closed_by)
	SELECT gen_random_uuid(), $1, 'refund', 'stripe', 'month' || n || '|500|' || c.cur, 'settle_month' || n, 'fp', 'month' || n, 500,
		c.cur, 'succeeded', 're_month' || n, at, at, at, 'w1'
	FROM g CROSS JOIN LATERAL (SELECT CASE WHEN n % 4 = 0 THEN 'eur' ELSE 'usd' END AS cur) c
	RETURNING id, tenant_id, created_at
)
INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
SELECT tenant_id, id, 'refund', 'month-' || id, false, 'new', created_at FROM ins`, tenant, t0)
	for _, tr := range [][2]string{{"pending", "firing"}, {"firing", "inactive"}} {
		at := t0.Add(-5 * 24 * time.Hour)
		if tr[1] == "inactive" {
			at = at.Add(30 * time.Minute)
		}
		e.exec(t, `INSERT INTO alert_history (at, rule_key, alert, instance_key, labels, from_state, to_state, value)
VALUES ($1, 'TimeoutRateHigh/0', 'TimeoutRateHigh', 'month', '{"kind":"refund","provider":"stripe"}', $2, $3, 0.5)`, at, tr[0], tr[1])
	}
}

// TestBrowserPagesFitTheWindow: every page each role can reach, full of long ids, fits the
// window at 1280 and 1024 px: the page never scrolls sideways; a wide table scrolls inside
// its own box and keeps its header in sight.
func TestBrowserPagesFitTheWindow(t *testing.T) {
	t.Parallel()
	var ev *alerts.Evaluator
	e := newDashEnv(t, withFollowUps, func(s *web.Server, tw *testworld.World) {
		as := alertstore.New(tw.DB)
		s.Recon, s.Exceptions, s.Operations, s.Insights, s.Firings = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB, rollupstore.New(tw.DB), as
		ev = &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: as, Store: as, Clock: s.Clock}
		s.AlertsDeps = web.AlertsDeps{AlertRules: ev.Rules, Alerts: as, AlertTest: ev}
	})
	opURL, exceptionURL, drillURL := seedFullDashboard(t, e, ev)
	for _, role := range desk.Roles {
		if _, err := accounts(e.db).CreateUser(context.Background(), string(role)+"@example.com", password, role); err != nil {
			t.Fatal(err)
		}
	}
	bulkURL := seedTeamWork(t, e)
	pages := map[desk.Role][]string{
		desk.RoleSupport: {"/ops", "/ops?tab=unknown", opURL, "/support?q=ORDER-00", "/follow-ups", bulkURL},
		desk.RoleOncall:  {"/ops?tab=unknown", opURL, "/audit", "/reconcile/exceptions", exceptionURL, "/alerts", bulkURL},
		desk.RoleManager: {"/reconcile", "/reconcile?bucket=hour", drillURL, "/insights", "/insights?range=7d", "/insights?range=30d",
			"/reconcile/exceptions", "/tenants"},
		desk.RoleAdmin: {"/ops?tab=unknown", "/reconcile", "/alerts", "/audit", "/admin/users", "/admin/tokens", "/tenants"},
	}
	alloc := browser(t)
	for _, role := range desk.Roles {
		email := string(role) + "@example.com"
		tab := newSession(t, alloc)
		e.browserLogin(t, tab, email)
		for _, path := range pages[role] {
			for _, w := range layoutWidths {
				checkFits(t, tab, e.url, path, role, w)
			}
		}
	}
}

// seedTeamWork adds what people share: a saved view with a long name on every queue page,
// support's follow-ups (one of an unknown refund that Stripe made, one still waiting), and a
// finished bulk lookup over the unknowns, which settles the first. It returns the bulk
// lookup's page. The roles' users exist already.
func seedTeamWork(t *testing.T, e *dashEnv) string {
	t.Helper()
	support := client(t)
	if resp := e.login(t, support, "support@example.com", password); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("support sign-in = %d", resp.StatusCode)
	}
	made := e.refundedButUnknown(t, longRef("FOLLOW", 0))
	waiting := e.notSentUnknown(t, longRef("FOLLOW", 1))
	for _, op := range []string{made.ID, waiting.ID} {
		e.post(t, support, "/ops/"+op+"/follow", url.Values{"back": {"/ops/" + op}})
	}
	oncall := e.signIn(t, "team-oncall@example.com", desk.RoleOncall)
	if resp := e.post(t, oncall, "/views", url.Values{"page": {"ops"}, "role": {"support"}, "query": {"tab=unknown&kind=refund&age=1h"},
		"name": {"Refunds unknown over an hour at the tenant with the longest name of all"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save a view = %d", resp.StatusCode)
	}
	bulk := bulkLocation(t, e.post(t, oncall, "/ops/lookup", url.Values{"scope": {"filter"}, "tab": {"unknown"}}))
	e.runBulk(t, 10)
	return bulk
}

// fitProblems lists, in the page, what makes it wider than the window and every table
// that is not in a scrolling box with a sticky header or has a cell too wide to read.
const fitProblems = `(() => {
	const out = [];
	const root = document.documentElement;
	if (document.querySelector(".error-page")) {
		out.push("an error page: " + document.querySelector("main").innerText.slice(0, 200));
	}
	if (root.scrollWidth > root.clientWidth) {
		out.push("page scrollWidth " + root.scrollWidth + " > clientWidth " + root.clientWidth);
		for (const el of document.querySelectorAll("body *")) {
			const r = el.getBoundingClientRect();
			if (r.right > root.clientWidth + 1 && el.parentElement.getBoundingClientRect().right <= root.clientWidth + 1) {
				out.push("overflows: <" + el.tagName.toLowerCase() + " class=" + el.className + "> right " + Math.round(r.right));
			}
		}
	}
	for (const table of document.querySelectorAll("table")) {
		const box = table.parentElement;
		if (!box.classList.contains("table-scroll")) {
			out.push("table " + (table.dataset.testid || table.className) + " is not in a .table-scroll box");
		}
		// In a table wider than its box, a cell this wide holds a long id, key or text that
		// neither wraps nor clips. (A table that fits stretches its cells: those are fine.)
		for (const cell of table.scrollWidth > box.clientWidth ? table.querySelectorAll("td") : []) {
			const width = cell.getBoundingClientRect().width;
			if (cell.colSpan === 1 && width > 600) {
				out.push("table " + (table.dataset.testid || table.className) + " has a cell " +
					Math.round(width) + " px wide: " + cell.innerText.slice(0, 80));
				break;
			}
		}
		const th = table.querySelector("thead th");
		if (th && getComputedStyle(th).position !== "sticky") {
			out.push("table " + (table.dataset.testid || table.className) + " header is not sticky");
		}
	}
	return out;
})()`

func checkFits(t *testing.T, tab context.Context, base, path string, role desk.Role, width int64) {
	t.Helper()
	what := fmt.Sprintf("%s %s at %d px", role, path, width)
	do(t, tab, what, chromedp.EmulateViewport(width, 800), chromedp.Navigate(base+path), chromedp.WaitVisible(byID("nav")))
	sctx, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	problems, err := chromedp.Run(sctx, chromedp.Evaluate[[]string](fitProblems))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if len(problems) > 0 {
		shot(t, tab, fmt.Sprintf("wide-%s-%d%s", role, width, safeName(path)))
		t.Errorf("%s does not fit:\n%s", what, joinLines(problems))
	} else if width == 1280 {
		// Every page as each role sees it, for a person to look over (.settle/screenshots).
		shot(t, tab, fmt.Sprintf("page-%s%s", role, safeName(path)))
	}
}

func safeName(path string) string {
	out := []byte{}
	for _, c := range []byte(path) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			out = append(out, c)
		} else {
			out = append(out, '-')
		}
	}
	if len(out) > 60 {
		out = out[:60]
	}
	return string(out)
}

func joinLines(lines []string) string {
	s := ""
	for _, l := range lines {
		s += "  " + l + "\n"
	}
	return s
}
