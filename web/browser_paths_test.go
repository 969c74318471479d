package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/pg/reconstore"

	"github.com/chromedp/chromedp"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/web"
)

// personPath walks one person's job in the browser and counts what it cost them: clicks,
// and searches typed and sent.
type personPath struct {
	t        *testing.T
	ctx      context.Context
	clicks   int
	searches int
}

// click presses target, which loads a page, and waits for done to be visible on it.
func (p *personPath) click(what string, target, done chromedp.CSS) {
	p.t.Helper()
	p.clicks++
	do(p.t, p.ctx, what, clickLoad(target), chromedp.WaitVisible(done))
}

// press presses target, which acts within the page, and waits for done to be visible.
func (p *personPath) press(what string, target, done chromedp.CSS) {
	p.t.Helper()
	p.clicks++
	do(p.t, p.ctx, what, chromedp.Click(target), chromedp.WaitVisible(done))
}

// search types q into the field testid and sends it with Enter, which loads a page, and
// waits for done on it.
func (p *personPath) search(what, testid, q string, done chromedp.CSS) {
	p.t.Helper()
	p.searches++
	do(p.t, p.ctx, what, chromedp.SendKeys(byID(testid), q+"\n"), chromedp.WaitVisible(done), loaded())
}

// TestBrowserPersonPaths measures the jobs the dashboard exists for, from where each person
// lands after signing in: on-call settles an unknown refund that Stripe did process in at
// most 3 clicks from /ops; support finds the customer sentence with one search and copies it;
// a manager sees the duplicate rate and the double charges of the last 7 days on one page.
func TestBrowserPersonPaths(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, func(s *web.Server, tw *testworld.World) {
		s.Recon, s.Exceptions, s.Operations, s.Insights, s.Firings = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB, rollupstore.New(tw.DB), alertstore.New(tw.DB)
	})
	settled := e.refundedButUnknown(t, "5100")
	e.notSentUnknown(t, "5101")
	for _, u := range []struct {
		email string
		role  desk.Role
	}{{"oncall@example.com", desk.RoleOncall}, {"support@example.com", desk.RoleSupport}, {"manager@example.com", desk.RoleManager}} {
		if _, err := accounts(e.db).CreateUser(context.Background(), u.email, password, u.role); err != nil {
			t.Fatal(err)
		}
	}
	alloc := browser(t)

	oncall := &personPath{t: t, ctx: newSession(t, alloc)}
	e.browserLogin(t, oncall.ctx, "oncall@example.com")
	do(t, oncall.ctx, "land on the queues", chromedp.WaitVisible(byID("queue-table")))
	oncall.click("open the oldest unknown refund", chromedp.CSS(`[data-testid="queue-row"][data-id="`+settled.ID+`"] a`), byID("lookup-button"))
	oncall.click("look it up at Stripe", byID("lookup-button"), byID("lookup-result"))
	if got := textOf(t, oncall.ctx, "op-status"); got != "succeeded" {
		t.Fatalf("after the lookup the refund is %q", got)
	}
	if op := e.get(t, settled.ID); op.Status != ops.StatusSucceeded || op.ProviderRef != e.fake.Refunds()[0].ID {
		t.Fatalf("the ledger holds %s with %q", op.Status, op.ProviderRef)
	}
	if oncall.clicks > 3 {
		t.Errorf("on-call needed %d clicks from /ops to settle a refund Stripe made, want at most 3", oncall.clicks)
	}
	shot(t, oncall.ctx, "path-oncall-settled")

	support := &personPath{t: t, ctx: newSession(t, alloc)}
	e.browserLogin(t, support.ctx, "support@example.com")
	support.click("open Support", byID("nav-support"), byID("support-search"))
	support.search("search the order", "support-search", "5101", byID("support-result"))
	sentence, err := chromedp.Run(support.ctx, chromedp.Value(byID("customer-sentence")))
	if err != nil || sentence != refund.UnknownSentence {
		t.Fatalf("support found %q (%v)", sentence, err)
	}
	support.press("copy the sentence", byID("copy-sentence"), chromedp.CSS(`[data-testid="copy-sentence"][data-copied="true"]`))
	if support.searches != 1 || support.clicks > 2 {
		t.Errorf("support needed %d searches and %d clicks to copy the sentence, want 1 search", support.searches, support.clicks)
	}
	if !strings.Contains(sentence, "check") {
		t.Errorf("the sentence %q does not say the refund is being checked", sentence)
	}
	shot(t, support.ctx, "path-support-copied")

	managerPath(t, e, alloc)
}

// managerPath: three days after a refund was asked for three times and charged twice, a
// manager opens Insights from the queues and reads both figures there, over the last 7 days.
func managerPath(t *testing.T, e *dashEnv, alloc context.Context) {
	t.Helper()
	seedReconFor(t, e.env, e.tenant.ID)
	e.clock.Advance(3 * 24 * time.Hour)
	if _, err := (&recon.Rollups{Store: rollupstore.New(e.db), Clock: e.clock}).CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	manager := &personPath{t: t, ctx: newSession(t, alloc)}
	e.browserLogin(t, manager.ctx, "manager@example.com")
	manager.click("open Insights", byID("nav-insights"), byID("chart-double-charges"))
	duplicates := textOf(t, manager.ctx, "chart-duplicate-rate")
	doubles := textOf(t, manager.ctx, "chart-double-charges")
	// The two duplicates of order 4417, among the five requests of the week (5100 and 5101
	// asked once each), three days back: outside the last 24 hours, inside the week.
	if !strings.Contains(duplicates, "40 % over the range (2 of 5 admitted requests)") || !strings.Contains(doubles, "1 double charge") {
		t.Errorf("the manager reads duplicates %q and double charges %q; want 2 of 5 and 1 double charge over 7 days",
			firstLine(duplicates), firstLine(doubles))
	}
	if manager.clicks != 1 {
		t.Errorf("the manager needed %d clicks to see both figures, want 1", manager.clicks)
	}
	shot(t, manager.ctx, "path-manager-insights")
}

// firstLine is a chart's text up to its headline.
func firstLine(s string) string {
	title, rest, _ := strings.Cut(strings.TrimSpace(s), "\n\n")
	headline, _, _ := strings.Cut(rest, "\n")
	return title + ": " + headline
}
