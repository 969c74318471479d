package web_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/refund"
)

// page GETs path and returns the status and body; redirects are not followed.
func (e *dashEnv) page(t *testing.T, c *http.Client, path string) (int, string) {
	t.Helper()
	resp, err := c.Get(e.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func mustContain(t *testing.T, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q", w)
		}
	}
}

// TestDashboardRoutesByRole checks every dashboard route for every role: allowed, refused
// with 403, or sent to the login page without a session.
func TestDashboardRoutesByRole(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	llm := e.llmUnknown(t, "chat-1")
	other, err := accounts(e.db).CreateUser(context.Background(), "other@example.com", password, desk.RoleSupport)
	if err != nil {
		t.Fatal(err)
	}
	clients := map[desk.Role]*http.Client{}
	for _, r := range desk.Roles {
		clients[r] = e.signIn(t, string(r)+"@example.com", r)
	}
	uid := func() string { return itoa(other.ID) }
	if _, err := e.db.CreateToken(context.Background(), e.tenant.ID, "route check"); err != nil {
		t.Fatal(err)
	}
	tokens, err := accountstore.New(e.db).Tokens(context.Background())
	if err != nil || len(tokens) != 1 {
		t.Fatalf("tokens %v, %v", tokens, err)
	}
	tokenID := func() string { return itoa(tokens[0].ID) }
	routes := []struct {
		method, path string
		form         url.Values
		min          desk.Role
		ok           int
	}{
		{"GET", "/ops", nil, desk.RoleSupport, 200},
		{"GET", "/ops/" + llm.ID, nil, desk.RoleSupport, 200},
		{"GET", "/support?q=chat-1", nil, desk.RoleSupport, 200},
		{"GET", "/audit", nil, desk.RoleOncall, 200},
		{"GET", "/admin/users", nil, desk.RoleAdmin, 200},
		{"POST", "/ops/" + llm.ID + "/lookup", url.Values{}, desk.RoleOncall, 303},
		{"POST", "/ops/" + llm.ID + "/close", url.Values{"version": {itoa(llm.Version)}, "to": {"failed"}}, desk.RoleOncall, 303},
		{"POST", "/ops/" + llm.ID + "/close-not-executed", url.Values{"version": {itoa(llm.Version)}}, desk.RoleOncall, 303},
		{"POST", "/ops/lookup", url.Values{"scope": {"selected"}}, desk.RoleOncall, 200},
		// Past the role check, approvals (not configured here) say so on the operation's page,
		// and no bulk run has this id.
		{"POST", "/ops/" + llm.ID + "/approve", url.Values{"version": {itoa(llm.Version)}, "proposal_id": {"1"}}, desk.RoleOncall, 303},
		{"POST", "/ops/" + llm.ID + "/reject", url.Values{"version": {itoa(llm.Version)}, "proposal_id": {"1"}, "note": {"no"}}, desk.RoleOncall, 303},
		{"POST", "/ops/bulk/1/stop", url.Values{}, desk.RoleOncall, 404},
		{"POST", "/admin/users", url.Values{"email": {"bad"}, "password": {"x"}, "role": {"support"}}, desk.RoleAdmin, 422},
		{"POST", "/admin/users/" + uid() + "/role", url.Values{"role": {"support"}}, desk.RoleAdmin, 303},
		{"POST", "/admin/users/" + uid() + "/disable", url.Values{}, desk.RoleAdmin, 303},
		{"POST", "/admin/users/" + uid() + "/enable", url.Values{}, desk.RoleAdmin, 303},
		{"GET", "/admin/tokens", nil, desk.RoleAdmin, 200},
		{"POST", "/admin/tokens", url.Values{"tenant": {"Not A Name"}}, desk.RoleAdmin, 422},
		{"POST", "/admin/tokens/" + tokenID() + "/revoke", url.Values{}, desk.RoleAdmin, 303},
	}
	for _, rt := range routes {
		do := func(c *http.Client) *http.Response {
			var resp *http.Response
			var err error
			if rt.method == "GET" {
				resp, err = c.Get(e.url + rt.path)
			} else {
				resp, err = c.PostForm(e.url+rt.path, rt.form)
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		if resp := do(client(t)); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
			t.Errorf("%s %s without a session = %d to %q; want 303 to the login page", rt.method, rt.path, resp.StatusCode, resp.Header.Get("Location"))
		}
		for _, role := range desk.Roles {
			want := rt.ok
			if !role.AtLeast(rt.min) {
				want = http.StatusForbidden
			}
			if resp := do(clients[role]); resp.StatusCode != want {
				t.Errorf("%s %s as %s = %d, want %d", rt.method, rt.path, role, resp.StatusCode, want)
			}
		}
	}
	if got := e.get(t, llm.ID); got.Status != ops.StatusUnknown {
		t.Errorf("the role matrix changed the operation to %s", got.Status)
	}
}

func itoa(n int64) string { return strconvFormat(n) }

func TestLookupClosesRefundedOperationWithRefundID(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	op := e.refundedButUnknown(t, "4417")
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)

	code, body := e.page(t, c, "/ops/"+op.ID)
	if code != 200 {
		t.Fatalf("detail = %d", code)
	}
	mustContain(t, body, op.ProviderKey, `data-testid="lookup-button"`, `data-testid="close-form"`, "Attempt 1", "timeout",
		html.EscapeString(refund.UnknownSentence), `data-testid="op-countdown"`, "23h 0m left")

	resp := e.post(t, c, "/ops/"+op.ID+"/lookup", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ops/"+op.ID {
		t.Fatalf("lookup = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	got := e.get(t, op.ID)
	refunds := e.fake.Refunds()
	if got.Status != ops.StatusSucceeded || len(refunds) != 1 || got.ProviderRef != refunds[0].ID || got.ClosedBy != "oncall@example.com" {
		t.Fatalf("after the lookup: %s %q by %q; Stripe has %v", got.Status, got.ProviderRef, got.ClosedBy, refunds)
	}
	_, body = e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, `data-outcome="closed"`, "Closed as succeeded", refunds[0].ID, `data-testid="evidence-item"`,
		"Lookup at provider", "Your refund of 38.00 USD has been issued.")
	if strings.Contains(body, `data-testid="close-form"`) {
		t.Error("a closed operation still offers the close form")
	}
	// The flash is shown once.
	if _, body = e.page(t, c, "/ops/"+op.ID); strings.Contains(body, `data-testid="lookup-result"`) {
		t.Error("the lookup result is shown again on reload")
	}
}

func TestLookupThatFindsNothingOffersNotExecutedOnlyAfterRetention(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	op := e.notSentUnknown(t, "5001")
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)

	e.post(t, c, "/ops/"+op.ID+"/lookup", nil)
	_, body := e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, `data-outcome="not_found"`, "has no refund carrying this operation", `data-testid="not-executed-why"`)
	if strings.Contains(body, `data-testid="not-executed-form"`) {
		t.Fatal("close as not executed offered while the key is still retained")
	}
	// Posting it anyway is refused on the server.
	e.post(t, c, "/ops/"+op.ID+"/close-not-executed", url.Values{"version": {itoa(op.Version)}, "note": {"never ran"}})
	if got := e.get(t, op.ID); got.Status != ops.StatusUnknown {
		t.Fatalf("closed as not executed within retention: %s", got.Status)
	}

	e.clock.Advance(24 * time.Hour)
	_, body = e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, `data-testid="not-executed-form"`, "passed")
	cur := e.get(t, op.ID)
	// A note is required.
	e.post(t, c, "/ops/"+op.ID+"/close-not-executed", url.Values{"version": {itoa(cur.Version)}, "note": {"   "}})
	if _, body = e.page(t, c, "/ops/"+op.ID); !strings.Contains(body, "Write a note") || e.get(t, op.ID).Status != ops.StatusUnknown {
		t.Fatal("an empty note was accepted")
	}
	e.post(t, c, "/ops/"+op.ID+"/close-not-executed", url.Values{"version": {itoa(cur.Version)}, "note": {"Stripe shows nothing; customer told."}})
	got := e.get(t, op.ID)
	if got.Status != ops.StatusFailed || got.ClosedBy != "oncall@example.com" {
		t.Fatalf("after close as not executed: %s by %q", got.Status, got.ClosedBy)
	}
	_, body = e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, "Not executed: a lookup at stripe found no refund", "Stripe shows nothing; customer told.", "Closed as failed")
}

func TestCloseNeedsNoteAndLosingRaceNamesWinner(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	op := e.notSentUnknown(t, "6001")
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := e.signIn(t, "bob@example.com", desk.RoleOncall)
	v := itoa(op.Version)
	ref := e.heldRefund(t, op, "re_by_hand")

	for _, form := range []url.Values{
		{"version": {v}, "to": {"succeeded"}, "provider_ref": {ref}, "note": {""}},
		// Its attempt timed out: Stripe may have run it, so a note cannot free the intent.
		{"version": {v}, "to": {"failed"}, "note": {"Customer cancelled"}},
		{"version": {v}, "to": {"succeeded"}, "note": {"paid"}},
		{"version": {v}, "to": {"unknown"}, "note": {"forged status"}},
		{"version": {"999"}, "to": {"failed"}, "note": {"forged version"}},
		{"version": {v}, "to": {"succeeded"}, "provider_ref": {"<script>"}, "note": {"x"}},
	} {
		if resp := e.post(t, alice, "/ops/"+op.ID+"/close", form); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("refused close %v = %d", form, resp.StatusCode)
		}
		if got := e.get(t, op.ID); got.Version != op.Version {
			t.Fatalf("refused close %v changed the operation: %s v%d", form, got.Status, got.Version)
		}
	}
	if resp := e.post(t, alice, "/ops/"+op.ID+"/close", url.Values{"version": {"x"}}); resp.StatusCode != 422 {
		t.Errorf("a version that is not a number = %d, want 422", resp.StatusCode)
	}

	e.post(t, alice, "/ops/"+op.ID+"/close", url.Values{"version": {v}, "to": {"succeeded"}, "provider_ref": {ref}, "note": {"Stripe's dashboard shows it; <b>refunded</b>."}})
	e.post(t, bob, "/ops/"+op.ID+"/close", url.Values{"version": {v}, "to": {"succeeded"}, "provider_ref": {ref}, "note": {"me too"}})
	got := e.get(t, op.ID)
	if got.Status != ops.StatusSucceeded || got.ClosedBy != "alice@example.com" {
		t.Fatalf("%s by %q", got.Status, got.ClosedBy)
	}
	_, body := e.page(t, bob, "/ops/"+op.ID)
	mustContain(t, body, "Already closed by alice@example.com", "Nothing was changed.", "Stripe&#39;s dashboard shows it; &lt;b&gt;refunded&lt;/b&gt;.")
	if strings.Contains(body, "<b>refunded</b>") {
		t.Error("a note is rendered as HTML")
	}
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'note'`, op.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d note evidence rows (%v), want 1", n, err)
	}
}

func TestLiveLeaseBlocksActions(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	op, _ := e.open(t, "7001", 500)
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	_, body := e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, `data-testid="actions-blocked"`, "A worker is sending it until")
	if strings.Contains(body, `data-testid="close-form"`) || strings.Contains(body, `data-testid="lookup-button"`) {
		t.Error("a leased operation offers actions")
	}
	e.post(t, c, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"failed"}, "note": {"stop"}})
	if got := e.get(t, op.ID); got.Status != ops.StatusInProgress {
		t.Fatalf("a leased operation was closed: %s", got.Status)
	}
	_, body = e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, "cannot be closed now")
}

func TestSupportSeesSentenceButCannotClose(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	op := e.refundedButUnknown(t, "4417")
	c := e.signIn(t, "support@example.com", desk.RoleSupport)

	code, body := e.page(t, c, "/support?q=4417")
	if code != 200 {
		t.Fatalf("/support = %d", code)
	}
	mustContain(t, body, `data-testid="support-result"`, html.EscapeString(refund.UnknownSentence), `data-testid="copy-sentence"`, "38.00 USD")
	for _, leak := range []string{op.ProviderKey, "timeout", "worker-1", "close-form", "/lookup", "succeeded", "failed"} {
		if strings.Contains(body, leak) {
			t.Errorf("the support page shows %q", leak)
		}
	}
	_, body = e.page(t, c, "/ops/"+op.ID)
	if strings.Contains(body, op.ProviderKey) || strings.Contains(body, `data-testid="op-actions"`) {
		t.Error("support sees the provider key or the actions on the detail page")
	}
	for _, path := range []string{"/close", "/lookup", "/close-not-executed"} {
		if resp := e.post(t, c, "/ops/"+op.ID+path, url.Values{"version": {itoa(op.Version)}, "to": {"failed"}, "note": {"x"}}); resp.StatusCode != 403 {
			t.Errorf("support POST %s = %d, want 403", path, resp.StatusCode)
		}
	}
	if got := e.get(t, op.ID); got.Version != op.Version {
		t.Fatal("a refused support POST changed the operation")
	}
	e.ledger.Close(context.Background(), ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "x",
		Evidence: ops.Evidence{Kind: ops.EvidenceLookup, ProviderRef: e.fake.Refunds()[0].ID, Summary: "found"}})
	_, body = e.page(t, c, "/support?q="+op.ID)
	mustContain(t, body, "Refunded", "Your refund of 38.00 USD has been issued.")
}

func TestOddSearchesNeverFail(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	for _, q := range []string{strings.Repeat("x", 100000), "a\x00b", "\xff\xfe", "' OR 1=1 --", "<script>alert(1)</script>", "%", "_", "00000000-0000-0000-0000-000000000000"} {
		code, body := e.page(t, c, "/support?q="+url.QueryEscape(q))
		if code != 200 {
			t.Errorf("/support?q=%.20q = %d", q, code)
		}
		if strings.Contains(body, "<script>alert(1)") {
			t.Error("the search is echoed as HTML")
		}
		if code, _ := e.page(t, c, "/ops?q="+url.QueryEscape(q)); code >= 500 {
			t.Errorf("/ops?q=%.20q = %d", q, code)
		}
		if code, _ := e.page(t, c, "/audit?actor="+url.QueryEscape(q)); code >= 500 {
			t.Errorf("/audit?actor=%.20q = %d", q, code)
		}
	}
	if code, body := e.page(t, c, "/ops/not-an-id"); code != 404 || !strings.Contains(body, `data-testid="error-status">404<`) {
		t.Errorf("unknown operation = %d", code)
	}
	if code, _ := e.page(t, c, "/ops/"+ops.NewOperationID()); code != 404 {
		t.Errorf("missing operation = %d", code)
	}
}

func TestStoredHTMLIsShownAsText(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	op := e.notSentUnknown(t, `<img src=x onerror=alert(1)>`)
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	for _, path := range []string{"/ops/" + op.ID, "/ops", "/support?q=" + url.QueryEscape(op.OrderRef), "/audit"} {
		code, body := e.page(t, c, path)
		if code != 200 {
			t.Fatalf("%s = %d", path, code)
		}
		if strings.Contains(body, "<img src=x") {
			t.Errorf("%s renders a stored order id as HTML", path)
		}
	}
	_, body := e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, "&lt;img src=x onerror=alert(1)&gt;")
}

func TestBulkLookupReportsClosedAndWhy(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	a := e.refundedButUnknown(t, "8001")
	b := e.refundedButUnknown(t, "8002")
	n := e.notSentUnknown(t, "8003")
	l := e.llmUnknown(t, "chat-9")
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)

	code, body := e.page(t, c, "/ops")
	mustContain(t, body, `data-testid="queue-count-unknown">4<`, `data-testid="lookup-selected"`, `name="ids" value="`+a.ID+`"`,
		`hx-trigger="every 30s"`, `data-testid="refresh-pause"`)
	if code != 200 {
		t.Fatal(code)
	}
	resp, err := c.PostForm(e.url+"/ops/lookup", url.Values{"scope": {"selected"}, "tab": {"unknown"}, "ids": {a.ID, n.ID}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	mustContain(t, string(page), `data-testid="bulk-closed">1<`, `data-testid="bulk-need-person">1<`, `data-outcome="not_found"`)
	if e.get(t, b.ID).Status != ops.StatusUnknown {
		t.Fatal("an unselected operation was closed")
	}

	resp, err = c.PostForm(e.url+"/ops/lookup", url.Values{"scope": {"filter"}, "tab": {"unknown"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	e.runBulk(t, 2)
	_, body = e.page(t, c, bulkLocation(t, resp))
	mustContain(t, body, `data-testid="bulk-closed">1<`, `data-testid="bulk-need-person">2<`,
		`data-outcome="no_lookup"`, "no lookup exists for them")
	if e.get(t, b.ID).Status != ops.StatusSucceeded || e.get(t, l.ID).Status != ops.StatusUnknown {
		t.Fatal("the filter lookup did not close b, or closed the LLM operation")
	}
	if resp := e.post(t, c, "/ops/lookup", url.Values{"scope": {"selected"}, "ids": {"1; DROP TABLE operations"}}); resp.StatusCode != 422 {
		t.Errorf("a forged id = %d, want 422", resp.StatusCode)
	}
}

func TestQueueRefreshControl(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	e.notSentUnknown(t, "9001")
	c := e.signIn(t, "support@example.com", desk.RoleSupport)
	_, body := e.page(t, c, "/ops?refresh=0")
	mustContain(t, body, `data-testid="refresh-resume"`, "Auto-refresh paused")
	if strings.Contains(body, "hx-trigger") || strings.Contains(body, `http-equiv="refresh"`) {
		t.Error("a paused queue still refreshes")
	}
	if strings.Contains(body, `name="ids"`) || strings.Contains(body, `data-testid="bulk-actions"`) {
		t.Error("support is offered the selection and lookups")
	}
	_, body = e.page(t, c, "/ops?refresh=5")
	mustContain(t, body, `hx-trigger="every 5s"`, `<meta http-equiv="refresh" content="5">`)
	if code, _ := e.page(t, c, "/ops?refresh=1"); code != 422 {
		t.Errorf("an interval not offered = %d", code)
	}
}

func TestAuditLogFilters(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	op := e.refundedButUnknown(t, "4417")
	other := e.notSentUnknown(t, "4418")
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	e.post(t, c, "/ops/"+op.ID+"/lookup", nil)

	_, body := e.page(t, c, "/audit?actor=oncall%40example.com")
	if n := strings.Count(body, `data-testid="audit-row"`); n != 2 {
		t.Errorf("%d rows for the person, want lookup and close", n)
	}
	_, body = e.page(t, c, "/audit?action=close")
	mustContain(t, body, "oncall@example.com")
	_, body = e.page(t, c, "/audit?op="+other.ID)
	if strings.Contains(body, `data-testid="audit-row-actor">oncall@example.com<`) || strings.Count(body, `data-testid="audit-row"`) != 2 {
		t.Errorf("the operation filter shows other operations' rows")
	}
	day := e.clock.Now().Format("2006-01-02")
	if _, body = e.page(t, c, "/audit?from="+day+"&to="+day); strings.Count(body, `data-testid="audit-row"`) < 4 {
		t.Error("today's entries are missing")
	}
	if _, body = e.page(t, c, "/audit?to=2020-01-01"); !strings.Contains(body, `data-testid="audit-empty"`) {
		t.Error("entries before 2020 shown")
	}
	for _, bad := range []string{"?action=drop", "?op=nope", "?from=yesterday", "?after_at=x&after_id=1"} {
		if code, _ := e.page(t, c, "/audit"+bad); code != 422 {
			t.Errorf("/audit%s = %d, want 422", bad, code)
		}
	}
}

func TestAdminManagesUsers(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)
	resp := e.post(t, admin, "/admin/users", url.Values{"email": {"new@example.com"}, "password": {password}, "role": {"oncall"}})
	if resp.StatusCode != 303 {
		t.Fatalf("add user = %d", resp.StatusCode)
	}
	newbie := client(t)
	if r := e.login(t, newbie, "new@example.com", password); r.StatusCode != 303 {
		t.Fatal("the new user cannot sign in")
	}
	if code, _ := e.page(t, newbie, "/audit"); code != 200 {
		t.Fatalf("new oncall user on /audit = %d", code)
	}
	users, _ := accountstore.New(e.db).Users(context.Background())
	var id int64
	for _, u := range users {
		if u.Email == "new@example.com" {
			id = u.ID
		}
	}
	e.post(t, admin, "/admin/users/"+itoa(id)+"/role", url.Values{"role": {"support"}})
	if code, _ := e.page(t, newbie, "/audit"); code != 403 {
		t.Fatalf("after the demotion /audit = %d, want 403", code)
	}
	e.post(t, admin, "/admin/users/"+itoa(id)+"/role", url.Values{"role": {"superuser"}})
	e.post(t, admin, "/admin/users/"+itoa(id)+"/disable", nil)
	if code, _ := e.page(t, newbie, "/ops"); code != 303 {
		t.Fatalf("a disabled user still opens /ops: %d", code)
	}
	_, body := e.page(t, admin, "/admin/users")
	mustContain(t, body, `data-testid="user-disabled"`, "(you)")
	me, _ := accountstore.New(e.db).Authenticate(context.Background(), "admin@example.com", password)
	if resp := e.post(t, admin, "/admin/users/"+itoa(me.ID)+"/disable", nil); resp.StatusCode != 403 {
		t.Errorf("an admin disabling themselves = %d, want 403", resp.StatusCode)
	}
	_, body = e.page(t, admin, "/audit?action=user.role")
	mustContain(t, body, "&#34;role&#34;:&#34;oncall&#34;")
	if resp := e.post(t, admin, "/admin/users", url.Values{"email": {"new@example.com"}, "password": {password}, "role": {"oncall"}}); resp.StatusCode != 422 {
		t.Errorf("a duplicate user = %d, want 422", resp.StatusCode)
	}
}

func strconvFormat(n int64) string { return strconv.FormatInt(n, 10) }

// TestPersonCannotFreeAnUncertainRefund is order 4520 of the demo: Stripe made the refund,
// its answer was lost, and an on-call engineer closes it by hand as failed; the next "try
// again" would then open a new operation with a new key and refund twice. The form does
// not offer failed, says why, pre-selects nothing, and the server refuses it anyway.
func TestPersonCannotFreeAnUncertainRefund(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	op := e.refundedButUnknown(t, "4520")
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)

	_, body := e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, `data-testid="close-form"`, `data-testid="close-to-succeeded"`, `data-testid="close-failed-why"`, "may have run it")
	form := body[strings.Index(body, `data-testid="close-form"`):]
	form = form[:strings.Index(form, "</form>")]
	if strings.Contains(form, `data-testid="close-to-failed"`) || strings.Contains(form, " checked") {
		t.Fatal("the close form offers failed, or pre-selects an outcome, for a refund Stripe may have made")
	}
	e.post(t, c, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"failed"}, "note": {"Customer says nothing arrived."}})
	if got := e.get(t, op.ID); got.Status != ops.StatusUnknown || got.Version != op.Version {
		t.Fatalf("a note closed an uncertain refund: %s v%d", got.Status, got.Version)
	}
	_, body = e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, "cannot be closed as failed")

	// The customer's "try again" is answered from the open operation: no second refund.
	ans, err := e.server.Refunds.Refund(context.Background(), refund.Request{TenantID: e.tenant.ID, Tenant: e.tenant.Name, OrderID: "4520",
		AmountCents: 3800, Currency: "usd", PaymentIntent: op.PaymentRef, RequestRef: "toolu_again"})
	if err != nil || ans.Status != refund.Checking || ans.OperationID != op.ID {
		t.Fatalf("try again: %+v %v", ans, err)
	}
	n := 0
	for _, r := range e.fake.Refunds() {
		if r.PaymentIntent == op.PaymentRef {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("Stripe holds %d refunds of the payment, want 1", n)
	}
	// The lookup settles it with Stripe's record.
	e.post(t, c, "/ops/"+op.ID+"/lookup", nil)
	if got := e.get(t, op.ID); got.Status != ops.StatusSucceeded {
		t.Fatalf("after the lookup: %s", got.Status)
	}
}
