package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/web"
)

// withFollowUps wires "Tell me when this settles" as serve does.
func withFollowUps(s *web.Server, tw *testworld.World) {
	s.FollowUps = &desk.FollowUps{Store: deskstore.New(tw.DB), Clock: s.Clock}
}

// TestBrowserFollowUpSettles: support follows an unknown refund from /support, on-call
// settles it with a lookup at the fake Stripe, and support sees the badge and, on the
// follow-ups page, the outcome and the sentence to send now. (The name is short because
// Chromium's singleton socket lives under the test's temporary folder, and a Unix socket's
// path has at most 107 bytes.)
func TestBrowserFollowUpSettles(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, withFollowUps)
	op := e.refundedButUnknown(t, "4630")
	for email, role := range map[string]desk.Role{"support@example.com": desk.RoleSupport, "oncall@example.com": desk.RoleOncall} {
		if _, err := accounts(e.db).CreateUser(context.Background(), email, password, role); err != nil {
			t.Fatal(err)
		}
	}
	alloc := browser(t)
	support := newSession(t, alloc)
	e.browserLogin(t, support, "support@example.com")
	do(t, support, "follow from the support page",
		chromedp.Navigate(e.url+"/support?q=4630"),
		chromedp.WaitVisible(byID("follow-button")),
		clickLoad(byID("follow-button")),
		chromedp.WaitVisible(byID("flash")),
	)
	if got := textOf(t, support, "flash"); !strings.Contains(got, "You follow this operation now") {
		t.Fatalf("after following: %q", got)
	}
	do(t, support, "press again", markFlashesStale(), clickLoad(byID("follow-button")), chromedp.WaitVisible(freshFlash))
	if got := textOf(t, support, "flash"); !strings.Contains(got, "already follow") {
		t.Fatalf("after pressing again: %q", got)
	}
	if n := count(t, support, `[data-testid="nav-followups-unread"]`); n != 0 {
		t.Fatalf("a badge before anything settled")
	}
	do(t, support, "the waiting follow-up", clickLoad(byID("nav-followups")), chromedp.WaitVisible(byID("followup-waiting")))

	oncall := newSession(t, alloc)
	e.browserLogin(t, oncall, "oncall@example.com")
	do(t, oncall, "settle with a lookup", chromedp.Navigate(e.url+"/ops/"+op.ID), chromedp.WaitVisible(byID("lookup-button")),
		clickLoad(byID("lookup-button")), chromedp.WaitVisible(byID("lookup-result")))
	if got := textOf(t, oncall, "op-status"); got != "succeeded" {
		t.Fatalf("status after the lookup = %q", got)
	}

	do(t, support, "back on the support page", chromedp.Navigate(e.url+"/support?q=4630"),
		chromedp.WaitVisible(byID("nav-followups-unread")))
	if got := textOf(t, support, "nav-followups-unread"); got != "1" {
		t.Fatalf("badge %q, want 1", got)
	}
	if n := count(t, support, `[data-testid="follow-button"]`); n != 0 {
		t.Fatalf("a closed refund still offers to follow it")
	}
	do(t, support, "open the follow-ups", clickLoad(byID("nav-followups")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="followup"][data-settled="true"]`)))
	want := refund.CustomerStatus(e.get(t, op.ID), nil).Sentence
	sentence, err := chromedp.Run(support, chromedp.Value(byID("customer-sentence")))
	if err != nil || sentence != want || !strings.Contains(sentence, "has been issued") {
		t.Fatalf("sentence %q (%v), want %q", sentence, err, want)
	}
	if got := textOf(t, support, "followup-outcome"); !strings.Contains(got, "succeeded") {
		t.Fatalf("outcome %q", got)
	}
	do(t, support, "copy the sentence", chromedp.Click(byID("copy-sentence")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="copy-sentence"][data-copied="true"]`)))
	shot(t, support, "follow-ups")
	do(t, support, "mark as read", clickLoad(byID("followup-read")), chromedp.WaitVisible(byID("followup")))
	if n := count(t, support, `[data-testid="nav-followups-unread"], [data-testid="followup-read"]`); n != 0 {
		t.Fatalf("the badge or the mark-as-read button is still there after marking read")
	}
}
