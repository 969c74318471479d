package views_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"github.com/settle-dev/settle/views"
)

// render renders c and parses the result, failing the test on any error.
func render(t *testing.T, c templ.Component) *html.Node {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// byTestID returns every element with that data-testid, in document order.
func byTestID(doc *html.Node, id string) []*html.Node {
	var out []*html.Node
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && attr(n, "data-testid") == id {
			out = append(out, n)
		}
	}
	return out
}

// one returns the only element with that data-testid.
func one(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	ns := byTestID(doc, id)
	if len(ns) != 1 {
		t.Fatalf("found %d elements with data-testid=%q, want 1", len(ns), id)
	}
	return ns[0]
}

func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func TestLoginShowsErrorAndKeepsEmail(t *testing.T) {
	doc := render(t, views.Login(views.LoginPage{Email: "a@b.example", Error: "The email or password is wrong.", Next: "/ops?tab=expired"}))
	if got := text(one(t, doc, "login-error")); got != "The email or password is wrong." {
		t.Errorf("error = %q", got)
	}
	if got := attr(one(t, doc, "login-email"), "value"); got != "a@b.example" {
		t.Errorf("email value = %q", got)
	}
	if got := attr(one(t, doc, "login-password"), "value"); got != "" {
		t.Errorf("password must never be echoed, got %q", got)
	}
	form := one(t, doc, "login-form")
	if attr(form, "method") != "post" || attr(form, "action") != "/login" {
		t.Errorf("form posts to %s %s", attr(form, "method"), attr(form, "action"))
	}
	if n := byTestID(doc, "nav"); len(n) != 0 {
		t.Error("the login page must not show account navigation")
	}
}

func TestLoginWithoutErrorHasNoAlert(t *testing.T) {
	doc := render(t, views.Login(views.LoginPage{}))
	if n := byTestID(doc, "login-error"); len(n) != 0 {
		t.Errorf("found %d error elements on a fresh login page", len(n))
	}
}

func TestLayoutShowsViewerAndLogout(t *testing.T) {
	doc := render(t, views.Error(views.ErrorPage{Viewer: views.Viewer{Email: "x@y.example", Role: "oncall"}, Status: 404, Title: "Not found", Message: "No such page."}))
	if got := text(one(t, doc, "nav-email")); got != "x@y.example" {
		t.Errorf("nav email = %q", got)
	}
	if got := text(one(t, doc, "nav-role")); got != "oncall" {
		t.Errorf("nav role = %q", got)
	}
	logout := one(t, doc, "logout-form")
	if attr(logout, "method") != "post" || attr(logout, "action") != "/logout" {
		t.Errorf("logout form %s %s", attr(logout, "method"), attr(logout, "action"))
	}
}

func TestErrorPage(t *testing.T) {
	doc := render(t, views.Error(views.ErrorPage{Status: 403, Title: "Forbidden", Message: "Your role may not open this page."}))
	if got := text(one(t, doc, "error-status")); got != "403" {
		t.Errorf("status = %q", got)
	}
	if got := text(one(t, doc, "error-message")); got != "Your role may not open this page." {
		t.Errorf("message = %q", got)
	}
}

func queuePage() views.QueuePage {
	return views.QueuePage{
		Viewer: views.Viewer{Email: "oncall@demo.settle", Role: "oncall"},
		Tabs: []views.QueueTab{
			{Status: "unknown", Label: "Unknown", Count: "3", URL: "/ops?tab=unknown", Active: true},
			{Status: "in_progress", Label: "In progress", Count: "12", URL: "/ops?tab=in_progress"},
			{Status: "expired", Label: "Expired", Count: "0", URL: "/ops?tab=expired"},
		},
		Filter: views.QueueFilter{Tab: "unknown", Provider: "stripe", Search: "ord_1"},
		Kinds:  []views.Option{{Value: "", Label: "Any"}, {Value: "refund", Label: "refund", Selected: true}},
	}
}

func TestQueueTabsAndFilter(t *testing.T) {
	doc := render(t, views.Queue(queuePage()))
	unknown := one(t, doc, "queue-tab-unknown")
	if attr(unknown, "aria-current") != "page" {
		t.Error("the active tab is not marked aria-current")
	}
	if attr(one(t, doc, "queue-tab-expired"), "aria-current") != "" {
		t.Error("an inactive tab is marked aria-current")
	}
	if got := text(one(t, doc, "queue-count-in_progress")); got != "12" {
		t.Errorf("in progress count = %q", got)
	}
	form := one(t, doc, "queue-filter")
	if attr(form, "method") != "get" || attr(form, "action") != "/ops" {
		t.Errorf("filter form %s %s", attr(form, "method"), attr(form, "action"))
	}
	if got := attr(one(t, doc, "filter-search"), "value"); got != "ord_1" {
		t.Errorf("search value = %q", got)
	}
	var selected []string
	for n := range one(t, doc, "filter-kind").Descendants() {
		if n.Type == html.ElementNode && n.Data == "option" && hasAttr(n, "selected") {
			selected = append(selected, attr(n, "value"))
		}
	}
	if len(selected) != 1 || selected[0] != "refund" {
		t.Errorf("selected kinds = %v", selected)
	}
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

func TestQueueEmptyState(t *testing.T) {
	doc := render(t, views.Queue(queuePage()))
	if got := text(one(t, doc, "queue-empty")); got != "No operations in this queue." {
		t.Errorf("empty state = %q", got)
	}
	if n := byTestID(doc, "queue-table"); len(n) != 0 {
		t.Error("an empty queue must not render a table")
	}
	if n := byTestID(doc, "queue-next"); len(n) != 0 {
		t.Error("an empty queue must not offer a next page")
	}
}

func TestQueueRowsAndNextPage(t *testing.T) {
	m := queuePage()
	m.Rows = []views.QueueRow{
		{ID: "0190-a", URL: "/ops/0190-a", Tenant: "demo", Kind: "refund", Provider: "stripe", Order: "ord_1", Amount: "12.50 EUR", Status: "in_progress", Phase: "sent_to_provider", Attempts: 2, Age: "3h 5m", Stalled: true},
		{ID: "0190-b", URL: "/ops/0190-b", Tenant: "demo", Kind: "llm_call", Provider: "openai", Status: "unknown", Attempts: 1, Age: "4m"},
	}
	m.NextURL = "/ops?after_created=2026-01-02T03%3A04%3A05Z&after_id=0190-b&tab=unknown"
	doc := render(t, views.Queue(m))
	rows := byTestID(doc, "queue-row")
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	if got := attr(rows[0], "data-id"); got != "0190-a" {
		t.Errorf("first row id = %q", got)
	}
	var link *html.Node
	for n := range rows[0].Descendants() {
		if n.Type == html.ElementNode && n.Data == "a" {
			link = n
			break
		}
	}
	if link == nil || attr(link, "href") != "/ops/0190-a" {
		t.Errorf("the operation id does not link to its page")
	}
	for _, want := range []string{"12.50 EUR", "sent_to_provider", "3h 5m", "ord_1"} {
		if !strings.Contains(text(rows[0]), want) {
			t.Errorf("row %q lacks %q", text(rows[0]), want)
		}
	}
	if n := byTestID(doc, "op-stalled"); len(n) != 1 {
		t.Errorf("%d stalled flags, want 1", len(n))
	}
	if got := attr(one(t, doc, "queue-next"), "href"); got != m.NextURL {
		t.Errorf("next page href = %q, want %q", got, m.NextURL)
	}
	if n := byTestID(doc, "queue-empty"); len(n) != 0 {
		t.Error("a queue with rows shows the empty state")
	}
}

func TestQueueEscapesText(t *testing.T) {
	m := queuePage()
	m.Rows = []views.QueueRow{{ID: "x", URL: "javascript:alert(1)", Order: "<script>alert(1)</script>"}}
	var buf bytes.Buffer
	if err := views.Queue(m).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "<script>alert(1)") || strings.Contains(buf.String(), `href="javascript:`) {
		t.Errorf("unsafe content rendered as is:\n%s", buf.String())
	}
}
