package views_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/views"
)

func oncall() views.Viewer { return views.Viewer{Email: "oncall@demo.settle", Role: "oncall"} }

func detailPage() views.OpDetailPage {
	return views.OpDetailPage{
		Viewer: oncall(),
		Op: views.OpSummary{ID: "op-1", URL: "/ops/op-1", Status: "unknown", Kind: "refund", Provider: "stripe",
			Order: "<b>4417</b>", ProviderKey: "settle_abc", Retention: "1d 0h", RetryUntil: "2026-03-03 08:00:00 UTC",
			RetryUntilISO: "2026-03-03T08:00:00Z", NowISO: "2026-03-02T09:00:00Z", RetentionLeft: "23h 0m left"},
		Customer: views.CustomerLine{Headline: "Being checked", Sentence: "We can't confirm your refund yet."},
		Timeline: []views.TimelineItem{
			{Kind: "attempt", Title: "Attempt 1", Outcome: "timeout", HTTPStatus: "504", ProviderRequestID: "req_1", Duration: "2s"},
			{Kind: "close", Title: "Closed as failed", Actor: "alice", Detail: "<script>x</script>"},
		},
		Actions: views.OpActions{CanLookup: true, CanClose: true, Version: "3", NotExecutedWhy: "Not yet: key retained."},
	}
}

func TestOpDetailShowsKeyTimelineAndActions(t *testing.T) {
	doc := render(t, views.OpDetail(detailPage()))
	if got := text(one(t, doc, "op-provider-key")); got != "settle_abc" {
		t.Errorf("provider key = %q", got)
	}
	cd := one(t, doc, "op-countdown")
	if attr(cd, "datetime") != "2026-03-03T08:00:00Z" || attr(cd, "data-now") != "2026-03-02T09:00:00Z" || text(cd) != "23h 0m left" {
		t.Errorf("countdown %v %q", cd.Attr, text(cd))
	}
	if got := len(byTestID(doc, "timeline-item")); got != 2 {
		t.Fatalf("%d timeline items", got)
	}
	for id, want := range map[string]string{"attempt-outcome": "timeout", "attempt-http": "HTTP 504", "attempt-request-id": "req_1", "attempt-duration": "2s"} {
		if got := text(one(t, doc, id)); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	form := one(t, doc, "close-form")
	if attr(form, "method") != "post" || attr(form, "action") != "/ops/op-1/close" {
		t.Errorf("close form %s %s", attr(form, "method"), attr(form, "action"))
	}
	if attr(one(t, doc, "close-note"), "required") == "" && !hasAttr(one(t, doc, "close-note"), "required") {
		t.Error("the note is not required")
	}
	one(t, doc, "lookup-button")
	one(t, doc, "not-executed-why")
	if n := byTestID(doc, "not-executed-form"); len(n) != 0 {
		t.Error("not executed offered without permission")
	}
	if got := text(one(t, doc, "customer-sentence")); got != "We can't confirm your refund yet." {
		t.Errorf("sentence = %q", got)
	}
	if got := text(one(t, doc, "op-order")); got != "<b>4417</b>" {
		t.Errorf("order = %q, want it as text", got)
	}
}

func TestOpDetailForSupportHasNoActions(t *testing.T) {
	m := detailPage()
	m.Viewer = views.Viewer{Email: "s@x", Role: "support"}
	m.Op.ProviderKey = ""
	doc := render(t, views.OpDetail(m))
	for _, id := range []string{"op-actions", "close-form", "lookup-button", "op-provider-key"} {
		if n := byTestID(doc, id); len(n) != 0 {
			t.Errorf("support sees %s", id)
		}
	}
	one(t, doc, "copy-sentence")
}

func TestOpDetailBlockedAndLookupResult(t *testing.T) {
	m := detailPage()
	m.Actions = views.OpActions{Blocked: "A worker is sending it."}
	m.LastLookup = &views.LookupResult{Outcome: "closed", Message: "Closed as succeeded: stripe has re_1."}
	doc := render(t, views.OpDetail(m))
	if got := text(one(t, doc, "actions-blocked")); got != "A worker is sending it." {
		t.Errorf("blocked = %q", got)
	}
	if r := one(t, doc, "lookup-result"); attr(r, "data-outcome") != "closed" || !strings.Contains(text(r), "re_1") {
		t.Errorf("lookup result %v %q", r.Attr, text(r))
	}
	if n := byTestID(doc, "close-form"); len(n) != 0 {
		t.Error("a blocked operation offers the close form")
	}
}

func TestSupportResults(t *testing.T) {
	doc := render(t, views.Support(views.SupportPage{Viewer: views.Viewer{Email: "s@x", Role: "support"}, Query: "4417", Searched: true,
		Results: []views.SupportResult{{ID: "a", Order: "4417", What: "Refund", Amount: "38.00 USD",
			Customer: views.CustomerLine{Headline: "Refunded", Sentence: "Your refund has been issued.", Known: true}}}}))
	res := one(t, doc, "support-result")
	if !strings.Contains(text(res), "38.00 USD") || text(one(t, doc, "customer-headline")) != "Refunded" {
		t.Errorf("result %q", text(res))
	}
	btn := one(t, doc, "copy-sentence")
	target := attr(btn, "data-copy-target")
	if target == "" || attr(one(t, doc, "customer-sentence"), "id") != target {
		t.Errorf("the copy button points at %q", target)
	}
	if n := byTestID(doc, "support-detail"); len(n) != 0 {
		t.Error("support gets a detail link")
	}
	empty := render(t, views.Support(views.SupportPage{Query: "x", Searched: true}))
	one(t, empty, "support-empty")
	notice := render(t, views.Support(views.SupportPage{Searched: true, Notice: "That search is too long."}))
	one(t, notice, "support-notice")
}

func TestBulkSummary(t *testing.T) {
	doc := render(t, views.Bulk(views.BulkPage{Viewer: oncall(), Closed: 3, NeedPerson: 2, BackURL: "/ops?tab=unknown",
		Reasons: []views.BulkReason{{Outcome: "not_found", Label: "not found", Count: 2}},
		Results: []views.LookupResult{{ID: "a", URL: "/ops/a", Outcome: "closed"}, {ID: "b", URL: "/ops/b", Outcome: "not_found", NeedsPerson: true}}}))
	if text(one(t, doc, "bulk-closed")) != "3" || text(one(t, doc, "bulk-need-person")) != "2" {
		t.Error("counts are wrong")
	}
	if r := one(t, doc, "bulk-reason"); attr(r, "data-outcome") != "not_found" || !strings.HasPrefix(text(r), "2") {
		t.Errorf("reason %q", text(r))
	}
	if n := len(byTestID(doc, "bulk-row")); n != 2 {
		t.Errorf("%d rows", n)
	}
	if attr(one(t, doc, "bulk-back"), "href") != "/ops?tab=unknown" {
		t.Error("no way back to the queue")
	}
}

func TestQueueSelectionAndRefresh(t *testing.T) {
	m := queuePage()
	m.CanAct, m.BulkCap = true, 200
	m.Rows = []views.QueueRow{{ID: "r1", URL: "/ops/r1", Status: "unknown"}}
	m.Refresh = views.Refresh{Seconds: 10, LiveURL: "/ops?tab=unknown", PauseURL: "/ops?refresh=0"}
	doc := render(t, views.Queue(m))
	live := one(t, doc, "queue-live")
	if attr(live, "hx-get") != "/ops?tab=unknown" || attr(live, "hx-trigger") != "every 10s" || attr(live, "hx-select") != "#queue-live" {
		t.Errorf("live region %v", live.Attr)
	}
	if attr(one(t, doc, "refresh-pause"), "href") != "/ops?refresh=0" {
		t.Error("no pause link")
	}
	if attr(one(t, doc, "row-pick"), "value") != "r1" {
		t.Error("the row box does not carry the id")
	}
	form := one(t, doc, "bulk-form")
	if attr(form, "method") != "post" || attr(form, "action") != "/ops/lookup" {
		t.Errorf("bulk form %s %s", attr(form, "method"), attr(form, "action"))
	}
	one(t, doc, "lookup-filter")

	m.CanAct = false
	m.Refresh = views.Refresh{Seconds: 0, ResumeURL: "/ops?refresh=30"}
	doc = render(t, views.Queue(m))
	if n := byTestID(doc, "row-pick"); len(n) != 0 {
		t.Error("support gets selection boxes")
	}
	if hasAttr(one(t, doc, "queue-live"), "hx-trigger") {
		t.Error("a paused page still polls")
	}
	one(t, doc, "refresh-resume")
}

func TestAuditAndUsers(t *testing.T) {
	doc := render(t, views.Audit(views.AuditPage{Viewer: oncall(), Filter: views.AuditFilter{Actor: "alice"},
		Entries: []views.AuditLogRow{{At: "t", Actor: "alice", Action: "close", Entity: "operation", EntityID: "a", EntityURL: "/ops/a", Reason: "<i>x</i>"}},
		NextURL: "/audit?after_id=1"}))
	if text(one(t, doc, "audit-row-actor")) != "alice" || attr(one(t, doc, "audit-actor"), "value") != "alice" {
		t.Error("audit row or filter echo is wrong")
	}
	one(t, doc, "audit-next")
	u := render(t, views.Users(views.UsersPage{Viewer: views.Viewer{Email: "a@x", Role: "admin"}, Roles: []string{"support", "admin"},
		Users: []views.UserRow{{ID: "1", Email: "a@x", Role: "admin", Self: true}, {ID: "2", Email: "b@x", Role: "support", Disabled: true}}}))
	if n := len(byTestID(u, "user-row")); n != 2 {
		t.Fatalf("%d user rows", n)
	}
	if n := len(byTestID(u, "user-role-select")); n != 1 {
		t.Error("an admin can change their own role")
	}
	one(t, u, "user-enable")
	one(t, u, "user-add-form")
	one(t, u, "nav-users")
}

func TestErrorPageShowsRequestIDForServerErrors(t *testing.T) {
	ctx := views.WithRequestID(context.Background(), "req-42")
	var b strings.Builder
	if err := views.Error(views.ErrorPage{Status: 500, Title: "Internal Server Error", Message: "Internal error."}).Render(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `data-testid="error-request-id">req-42<`) {
		t.Errorf("no request id on a 500 page")
	}
	b.Reset()
	_ = views.Error(views.ErrorPage{Status: 404, Title: "Not Found"}).Render(ctx, &b)
	if strings.Contains(b.String(), "req-42") {
		t.Error("a 404 page shows the request id")
	}
}
