package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/web"
)

// withApprovals turns on four-eyes approvals (ops rule 13) with the global policy pol.
func withApprovals(pol ops.ApprovalPolicy) func(*web.Server, *testworld.World) {
	return func(s *web.Server, tw *testworld.World) {
		d := s.Desk.(*desk.Desk)
		d.Approvals, d.Proposals, d.People = pol, tw.DB, accountstore.New(tw.DB)
	}
}

// TestBrowserFourEyesNotExecuted: with approvals on for closes as not
// executed, an on-call's close of a refund Stripe never ran becomes a proposal; the page and
// the queue show it awaiting approval; its proposer cannot approve it, even by posting the
// form; a second on-call's approval closes it as failed, with both names in the audit row.
func TestBrowserFourEyesNotExecuted(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, withApprovals(ops.ApprovalPolicy{NotExecuted: true}))
	op := e.notSentUnknown(t, "7001")
	e.clock.Advance(25 * time.Hour) // past Stripe's key retention
	for _, email := range []string{"alice@example.com", "bob@example.com"} {
		if _, err := accounts(e.db).CreateUser(context.Background(), email, password, desk.RoleOncall); err != nil {
			t.Fatal(err)
		}
	}
	alloc := browser(t)
	alice, bob := newSession(t, alloc), newSession(t, alloc)
	e.browserLogin(t, alice, "alice@example.com")
	do(t, alice, "alice proposes closing as not executed", chromedp.Navigate(e.url+"/ops/"+op.ID),
		chromedp.WaitVisible(byID("not-executed-approval")),
		chromedp.SendKeys(byID("not-executed-note"), "Stripe has no refund for order 7001; the customer was told."),
		clickLoad(byID("not-executed-button")), chromedp.WaitVisible(byID("op-proposal")))
	if got := textOf(t, alice, "proposal-badge"); got != "awaiting approval" {
		t.Fatalf("proposal badge = %q", got)
	}
	if got := textOf(t, alice, "op-status"); got != "unknown" {
		t.Fatalf("a proposal changed the status to %q", got)
	}
	if got := textOf(t, alice, "proposal-by"); got != "alice@example.com" {
		t.Fatalf("proposed by %q", got)
	}
	if n := count(t, alice, `[data-testid="approve-button"]`); n != 0 {
		t.Fatalf("the proposer is offered %d approve buttons", n)
	}
	shot(t, alice, "approval-proposed")
	do(t, alice, "alice posts an approval anyway", chromedp.Evaluate[chromedp.Void](`(() => {
		const f = document.createElement("form");
		f.method = "post"; f.action = location.pathname + "/approve";
		for (const name of ["version", "proposal_id"]) {
			const v = document.createElement("input");
			v.name = name; v.value = document.querySelector('[data-testid="reject-form"] input[name="' + name + '"]').value;
			f.appendChild(v);
		}
		document.body.appendChild(f); f.submit();
	})()`), chromedp.WaitVisible(byID("flash")))
	if got := textOf(t, alice, "flash"); !strings.Contains(got, "You proposed this close: a second person must approve it.") {
		t.Fatalf("alice's own approval is answered %q", got)
	}
	if cur := e.get(t, op.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("the proposer's approval closed it as %s", cur.Status)
	}
	do(t, alice, "the queue shows the proposal", chromedp.Navigate(e.url+"/ops?tab=unknown&refresh=0"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="queue-row"][data-id="`+op.ID+`"] [data-testid="queue-awaiting"]`)))

	e.browserLogin(t, bob, "bob@example.com")
	do(t, bob, "bob opens the operation", chromedp.Navigate(e.url+"/ops/"+op.ID), chromedp.WaitVisible(byID("approve-button")))
	if got := textOf(t, bob, "proposal-note"); !strings.Contains(got, "Stripe has no refund for order 7001") {
		t.Fatalf("bob reads the note %q", got)
	}
	shot(t, bob, "approval-awaiting")
	do(t, bob, "bob approves", clickLoad(byID("approve-button")), chromedp.WaitVisible(byID("flash")))
	if got := textOf(t, bob, "op-status"); got != "failed" {
		t.Fatalf("after the approval the status is %q (%s)", got, textOf(t, bob, "flash"))
	}
	shot(t, bob, "approval-approved")
	var actor, after string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT actor, after::text FROM audit_log
WHERE entity_id = $1 AND action = 'close'`, op.ID).Scan(&actor, &after); err != nil {
		t.Fatal(err)
	}
	if actor != "alice@example.com" || !strings.Contains(after, `"approved_by": "bob@example.com"`) || !strings.Contains(after, `"proposed_by": "alice@example.com"`) {
		t.Fatalf("the close's audit row: %s %s", actor, after)
	}
	do(t, bob, "the audit page", chromedp.Navigate(e.url+"/audit?op="+op.ID), chromedp.WaitVisible(byID("audit-table")))
	row, err := chromedp.Run(bob, chromedp.Evaluate[string](`[...document.querySelectorAll('[data-testid="audit-row"]')]
		.filter(r => r.querySelector('[data-testid="audit-row-action"]').textContent.trim() === "close").map(r => r.textContent).join("|")`))
	if err != nil || !strings.Contains(row, "alice@example.com") || !strings.Contains(row, "bob@example.com") {
		t.Fatalf("the audit page's close row = %q (%v)", row, err)
	}
}
