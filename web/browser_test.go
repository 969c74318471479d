package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/static"
)

// chromiumPath is Debian's Chromium. Tests never install it (`make deps` does): when it is
// missing the browser tests skip, or fail under SETTLE_TEST_STRICT=1, as in CI, where a
// skipped browser test would hide a broken dashboard.
const chromiumPath = "/usr/bin/chromium"

func ensureChromium(t *testing.T) {
	t.Helper()
	testtool.Heavy(t, "a headless browser")
	testtool.Need(t, chromiumPath, "sudo apt-get install -y chromium (or make deps)")
}

// browser starts a headless Chromium with a fresh profile and returns its first tab; each
// context made from it with newSession is a separate person with their own cookies.
func browser(t *testing.T) context.Context {
	t.Helper()
	ensureChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium leaves its singleton socket folder in TMPDIR when it is killed, as
		// chromedp does at the end: keep it in the test's own folder.
		chromedp.Env("TMPDIR="+t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	// The browser's whole life, a bound for a test that hangs beyond its steps' own limits
	// (20 s each). The longest test, every page at two widths for four roles, takes 30 s
	// alone and ran past 90 s beside the other packages on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	root, cancelRoot := chromedp.NewContext(alloc)
	t.Cleanup(cancelRoot)
	if err := chromedp.Do(root); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return root
}

// newSession opens a tab in its own browser context, so two sessions never share cookies.
func newSession(t *testing.T, alloc context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithNewBrowserContext())
	t.Cleanup(func() { cancel() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		shot(t, ctx, "failed-"+strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("%s: %v", what, err)
	}
}

func textOf(t *testing.T, ctx context.Context, testid string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Text(byID(testid)))
	if err != nil {
		t.Fatalf("read %s: %v", testid, err)
	}
	return strings.TrimSpace(s)
}

func byID(testid string) chromedp.CSS { return chromedp.CSS(`[data-testid="` + testid + `"]`) }

// freshFlash is a flash message shown after markFlashesStale: waiting for it waits out the
// answer to a second press instead of finding the flash of the first one still on the page.
var freshFlash = chromedp.CSS(`[data-testid="flash"]:not([data-stale])`)

// markFlashesStale marks the flash messages on the page now.
func markFlashesStale() chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('[data-testid="flash"]').forEach(e => { e.dataset.stale = "1" })`)
}

// clickLoad presses target and waits until the browser shows the next document, loaded.
// Waiting for an element alone is not enough when the page before the press already had it:
// the wait would succeed on the old page while the new one is still loading.
func clickLoad(target chromedp.CSS) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Evaluate[chromedp.Void](`document.documentElement.dataset.stale = "1"`),
		chromedp.Click(target),
		loaded(),
	)
}

// loaded waits until the page's document is one not marked stale and has finished loading.
// Wait for it after an element of a new document before acting on that document: when the
// document's DOMContentLoaded fires, Chromium forgets every element it has named to the
// test, so an element found while the page still ran its scripts (a while, on a loaded
// machine) is gone when the next step acts on it, with "Could not find node with given id".
func loaded() chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.JSPath(`document.readyState === "complete" && !document.documentElement.dataset.stale ? document.body : null`))
}

// count returns how many elements match a CSS selector, without waiting for any.
func count(t *testing.T, ctx context.Context, css string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", css)))
	if err != nil {
		t.Fatalf("count %s: %v", css, err)
	}
	return n
}

// shot saves a full-page screenshot under .settle/screenshots for people to look at.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100 makes a PNG; less is a JPEG
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	dir := filepath.Join(pgtest.ProjectDir(), ".settle", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (e *dashEnv) browserLogin(t *testing.T, ctx context.Context, email string) {
	t.Helper()
	do(t, ctx, "sign in as "+email,
		chromedp.Navigate(e.url+"/login"),
		chromedp.WaitVisible(byID("login-form")),
		chromedp.SendKeys(byID("login-email"), email),
		chromedp.SendKeys(byID("login-password"), password),
		chromedp.Click(byID("login-submit")),
		chromedp.WaitVisible(byID("nav-email")),
		loaded(),
	)
}

// TestBrowserOncallLooksUpAndSupportAnswers is the dashboard's main story in a real
// browser: support sees "can't confirm yet" and no close button; on-call opens the Unknown
// tab, looks up the operation the fake Stripe refunded and sees it closed with the refund
// id; support then reads the refunded sentence.
func TestBrowserOncallLooksUpAndSupportAnswers(t *testing.T) {
	t.Parallel()
	ensureChromium(t)
	if !static.HasHTMX() {
		t.Fatal("static/vendor/htmx.min.js was not embedded: run 'make deps' (npm ci) before the tests")
	}
	e := newDashEnv(t)
	op := e.refundedButUnknown(t, "4417")
	e.notSentUnknown(t, "4420")
	e.llmUnknown(t, "chat-77")
	for _, u := range []struct {
		email string
		role  desk.Role
	}{{"oncall@example.com", desk.RoleOncall}, {"support@example.com", desk.RoleSupport}, {"admin@example.com", desk.RoleAdmin}} {
		if _, err := accounts(e.db).CreateUser(context.Background(), u.email, password, u.role); err != nil {
			t.Fatal(err)
		}
	}
	alloc := browser(t)

	support := newSession(t, alloc)
	e.browserLogin(t, support, "support@example.com")
	do(t, support, "support search",
		chromedp.Navigate(e.url+"/support"),
		chromedp.SendKeys(byID("support-search"), "4417"),
		clickLoad(byID("support-submit")),
		chromedp.WaitVisible(byID("support-result")),
	)
	sentence, err := chromedp.Run(support, chromedp.Value(byID("customer-sentence")))
	if err != nil || sentence != refund.UnknownSentence {
		t.Fatalf("support sentence = %q (%v)", sentence, err)
	}
	if n := count(t, support, `[data-testid="close-button"], [data-testid="lookup-button"], form[action$="/close"]`); n != 0 {
		t.Fatalf("support sees %d close or lookup controls", n)
	}
	do(t, support, "copy the sentence", chromedp.Click(byID("copy-sentence")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="copy-sentence"][data-copied="true"]`)))
	shot(t, support, "support")

	oncall := newSession(t, alloc)
	e.browserLogin(t, oncall, "oncall@example.com")
	shot(t, oncall, "queue")
	if ok, err := chromedp.Run(oncall, chromedp.Evaluate[bool](`typeof htmx === "object"`)); err != nil || !ok {
		t.Fatalf("htmx is not loaded on the queue page (%v)", err)
	}
	do(t, oncall, "open the Unknown tab and the operation",
		clickLoad(byID("queue-tab-unknown")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="queue-row"][data-id="`+op.ID+`"]`)),
		clickLoad(chromedp.CSS(`[data-testid="queue-row"][data-id="`+op.ID+`"] a`)),
		chromedp.WaitVisible(byID("lookup-button")),
	)
	if got := textOf(t, oncall, "op-status"); got != "unknown" {
		t.Fatalf("status before the lookup = %q", got)
	}
	shot(t, oncall, "detail-unknown")
	do(t, oncall, "look up at the provider", clickLoad(byID("lookup-button")), chromedp.WaitVisible(byID("lookup-result")))
	refundID := e.fake.Refunds()[0].ID
	if got := textOf(t, oncall, "lookup-result"); !strings.Contains(got, "Closed as succeeded") || !strings.Contains(got, refundID) {
		t.Fatalf("lookup result = %q, want closed with %s", got, refundID)
	}
	if got := textOf(t, oncall, "op-status"); got != "succeeded" {
		t.Fatalf("status after the lookup = %q", got)
	}
	if got := textOf(t, oncall, "op-provider-ref"); got != refundID {
		t.Fatalf("provider record = %q, want %s", got, refundID)
	}
	shot(t, oncall, "detail-closed")

	do(t, oncall, "look up everything in the Unknown tab",
		chromedp.Navigate(e.url+"/ops?tab=unknown&refresh=0"),
		chromedp.WaitVisible(byID("lookup-filter")),
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		clickLoad(byID("lookup-filter")),
		chromedp.WaitVisible(`[data-testid="bulk-run-state"][data-state="running"]`),
	)
	// The run is background work: a runner does it while the page follows it by itself.
	e.runBulk(t, 20)
	do(t, oncall, "the run's page follows it to the end", chromedp.WaitVisible(`[data-testid="bulk-run-state"][data-state="done"]`))
	if got := textOf(t, oncall, "bulk-need-person"); got != "2" {
		t.Errorf("bulk need a person = %q, want 2 (not found, LLM)", got)
	}
	shot(t, oncall, "bulk")
	do(t, oncall, "audit log", chromedp.Navigate(e.url+"/audit"), chromedp.WaitVisible(byID("audit-table")))
	shot(t, oncall, "audit")

	do(t, support, "support search again",
		chromedp.Navigate(e.url+"/support?q=4417"),
		chromedp.WaitVisible(byID("support-result")),
	)
	if got := textOf(t, support, "customer-headline"); got != "Refunded" {
		t.Errorf("support headline after the lookup = %q", got)
	}
	if n := count(t, support, `[data-testid="close-button"]`); n != 0 {
		t.Errorf("support sees a close button")
	}
	shot(t, support, "support-refunded")

	admin := newSession(t, alloc)
	e.browserLogin(t, admin, "admin@example.com")
	do(t, admin, "users page", chromedp.Navigate(e.url+"/admin/users"), chromedp.WaitVisible(byID("users-table")))
	shot(t, admin, "users")
	do(t, admin, "issue a token", chromedp.Navigate(e.url+"/admin/tokens"), chromedp.WaitVisible(byID("token-add-form")),
		chromedp.SendKeys(byID("token-add-tenant"), "browser-shop"), chromedp.SendKeys(byID("token-add-name"), "support agent"),
		clickLoad(byID("token-add-submit")), chromedp.WaitVisible(byID("token-issued")))
	tctx, cancel := context.WithTimeout(admin, 20*time.Second)
	got, err := chromedp.Run(tctx, chromedp.Value(byID("token-value")))
	cancel()
	if err != nil || !strings.HasPrefix(got, "stl_") || len(got) != 68 {
		t.Errorf("the issued token reads %q (%v)", got, err)
	}
	if n := count(t, admin, `[data-testid="token-row"][data-name="support agent"]`); n != 1 {
		t.Errorf("%d rows for the new token", n)
	}
	shot(t, admin, "tokens")
	do(t, admin, "sign out", chromedp.Navigate(e.url+"/login"), chromedp.WaitVisible(byID("nav")))
	do(t, admin, "login page", clickLoad(chromedp.CSS(`[data-testid="logout-form"] button`)), chromedp.WaitVisible(byID("login-form")))
	shot(t, admin, "login")
}

// TestBrowserTwoPeopleCloseTheSameRow: both open the page, both close; the second is told
// who closed it first and nothing changes.
func TestBrowserTwoPeopleCloseTheSameRow(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	op := e.notSentUnknown(t, "5150")
	ref := e.heldRefund(t, op, "re_seen_in_stripe")
	for _, email := range []string{"alice@example.com", "bob@example.com"} {
		if _, err := accounts(e.db).CreateUser(context.Background(), email, password, desk.RoleOncall); err != nil {
			t.Fatal(err)
		}
	}
	alloc := browser(t)
	alice, bob := newSession(t, alloc), newSession(t, alloc)
	for who, ctx := range map[string]context.Context{"alice@example.com": alice, "bob@example.com": bob} {
		e.browserLogin(t, ctx, who)
		do(t, ctx, who+" opens the operation", chromedp.Navigate(e.url+"/ops/"+op.ID), chromedp.WaitVisible(byID("close-form")),
			chromedp.Click(byID("close-to-succeeded")), chromedp.SendKeys(byID("close-ref"), ref),
			chromedp.SendKeys(byID("close-note"), "Stripe's dashboard shows the refund. ("+who+")"))
	}
	do(t, alice, "alice closes", clickLoad(byID("close-button")), chromedp.WaitVisible(byID("flash")))
	if got := textOf(t, alice, "op-status"); got != "succeeded" {
		t.Fatalf("after alice's close: %q", got)
	}
	do(t, bob, "bob closes", clickLoad(byID("close-button")), chromedp.WaitVisible(byID("flash")))
	got := textOf(t, bob, "flash")
	if !strings.Contains(got, "Already closed by alice@example.com") {
		t.Fatalf("bob is told %q, want who closed it first", got)
	}
	shot(t, bob, "already-closed")
	if cur := e.get(t, op.ID); cur.ClosedBy != "alice@example.com" || cur.Version != op.Version+1 {
		t.Fatalf("the operation is %s by %s at version %d", cur.Status, cur.ClosedBy, cur.Version)
	}
}
