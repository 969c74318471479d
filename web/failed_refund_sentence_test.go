package web_test

import (
	"context"
	"html"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/mcptool"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/web"
)

// failedAfterSuccess runs a refund of order to success with ref, records the refunds in
// also as made for the same operation (as the reconciler or a webhook records a double
// refund), then fails ref as Stripe does when an accepted refund fails later.
func (e *dashEnv) failedAfterSuccess(t *testing.T, order, ref string, also ...string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	op, a := e.open(t, order, 3800)
	op, err := e.seed().Finish(ctx, op, a, "worker-1", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
		Result: &ops.Result{ProviderRef: ref, Body: []byte(`{"id":"` + ref + `","status":"pending"}`)}})
	if err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("refund %s: %+v (%v)", order, op, err)
	}
	ev := ops.Evidence{Kind: ops.EvidenceWebhook, Summary: "refund.updated"}
	for _, other := range also {
		rec := ops.ProviderRecord{Provider: "stripe", Ref: other, OperationID: op.ID, AmountCents: 3800, Currency: "usd", Status: "succeeded"}
		if _, err := e.ledger.ApplyRecord(ctx, e.db, rec, ev, "stripe reconciliation"); err != nil {
			t.Fatal(err)
		}
	}
	failed := ops.ProviderRecord{Provider: "stripe", Ref: ref, OperationID: op.ID, AmountCents: 3800, Currency: "usd", Status: "failed"}
	if a, err := e.ledger.ApplyRecord(ctx, e.db, failed, ev, "webhook"); err != nil || a.Outcome != "failed_after_success" {
		t.Fatalf("%s failed: %+v (%v)", ref, a, err)
	}
	return e.get(t, op.ID)
}

// TestAFailedRefundIsNotNoMoneyWhileAnotherRefundOfItWasMade defends ops rule 12: the
// sentence support sends about a failed refund says no money was moved only while Settle
// holds no other refund of the operation as made. When a double refund of it moved money,
// /support and the operation's page name that refund as on its way instead.
func TestAFailedRefundIsNotNoMoneyWhileAnotherRefundOfItWasMade(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	doubled := e.failedAfterSuccess(t, "5120", "re_first5120", "re_second5120")
	e.failedAfterSuccess(t, "5121", "re_lone5121")
	c := e.signIn(t, "support@example.com", desk.RoleSupport)
	for _, path := range []string{"/support?q=5120", "/ops/" + doubled.ID} {
		_, body := e.page(t, c, path)
		if strings.Contains(body, "no money was moved") || strings.Contains(body, "Not refunded") {
			t.Errorf("%s says no money moved while re_second5120 refunded 38.00 USD", path)
		}
		mustContain(t, body, "re_second5120", "on its way", "38.00 USD")
	}
	_, body := e.page(t, c, "/support?q=5121")
	mustContain(t, body, html.EscapeString(refund.Sentence(refund.Failed, " of 38.00 USD")), "Not refunded")
}

// TestAFailedAfterSuccessSummaryIsAsOfItsTime defends ops rule 12: the summary of a
// failed-after-success exception is written when the failure is seen, so a refund of the
// operation recorded later leaves it saying Settle knows of none. The exception's page says
// when the summary was written and that the charges it lists are read now, and lists the
// later refund, instead of presenting the summary as what Settle knows now.
func TestAFailedAfterSuccessSummaryIsAsOfItsTime(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, func(s *web.Server, tw *testworld.World) {
		s.Recon, s.Exceptions = rollupstore.New(tw.DB), reconstore.New(tw.DB)
	})
	op := e.failedAfterSuccess(t, "5122", "re_lone5122")
	later := ops.ProviderRecord{Provider: "stripe", Ref: "re_later5122", OperationID: op.ID, AmountCents: 3800, Currency: "usd", Status: "succeeded"}
	if _, err := e.ledger.ApplyRecord(context.Background(), e.db, later, ops.Evidence{Kind: ops.EvidenceWebhook, Summary: "refund.created"}, "webhook"); err != nil {
		t.Fatal(err)
	}
	var id int64
	var lastSeen string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT id, to_char(last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI')
FROM recon_exceptions WHERE kind = 'failed_after_success' AND operation_id = $1`, op.ID).Scan(&id, &lastSeen); err != nil {
		t.Fatal(err)
	}
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	code, body := e.page(t, c, "/reconcile/exceptions/"+strconv.FormatInt(id, 10))
	if code != 200 {
		t.Fatalf("the exception page = %d\n%s", code, body)
	}
	mustContain(t, body, "knows of no other refund", "re_later5122", `data-testid="exception-summary-asof"`,
		"This summary was written when the exception was last seen, "+lastSeen+" UTC")
}

// TestRefundStatusOfAFailedRefundNamesAnotherRefundOfItThatWasMade defends ops rule 12 over
// MCP: refund_status of a refund that failed after it succeeded, while a double refund of
// the same operation moved money, does not tell the model that nothing was refunded nor
// give it the "no money was moved" sentence; it names the other refund as on its way.
func TestRefundStatusOfAFailedRefundNamesAnotherRefundOfItThatWasMade(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	cs := e.session(t)
	_, first, text := call(t, cs, "issue_refund", storyArgs(), nil)
	if first.Status != refund.Refunded {
		t.Fatalf("refund: %+v %q", first, text)
	}
	ctx := context.Background()
	ev := ops.Evidence{Kind: ops.EvidenceWebhook, Summary: "refund.updated"}
	for _, rec := range []ops.ProviderRecord{
		{Provider: "stripe", Ref: "re_mcp_second", OperationID: first.OperationID, AmountCents: 3800, Currency: "usd", Status: "succeeded"},
		{Provider: "stripe", Ref: first.RefundID, OperationID: first.OperationID, AmountCents: 3800, Currency: "usd", Status: "failed"},
	} {
		if _, err := e.ledger.ApplyRecord(ctx, e.db, rec, ev, "webhook"); err != nil {
			t.Fatal(err)
		}
	}
	_, a, text := call(t, cs, "refund_status", map[string]any{"operation_id": first.OperationID}, nil)
	if a.Status != refund.Failed {
		t.Fatalf("status after the refund failed: %+v %q", a, text)
	}
	if a.CustomerMessage == mcptool.CustomerFailed || strings.Contains(text, "nothing was refunded") ||
		!strings.Contains(a.CustomerMessage, "re_mcp_second") || len(a.OtherRefunds) != 1 || a.OtherRefunds[0].RefundID != "re_mcp_second" {
		t.Fatalf("a failed refund with another refund made is answered %+v %q", a, text)
	}
}

// TestRefundStatusOfARefundThatFailedAfterSuccessSaysSo defends ops rule 12: a refund Stripe
// accepted and later failed was not refused, and its answer must not say it was. Its
// reason is failed_after_success, which tells the caller the customer was once told the
// refund was on its way.
func TestRefundStatusOfARefundThatFailedAfterSuccessSaysSo(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t, time.Second, 3*time.Second)
	cs := e.session(t)
	_, first, text := call(t, cs, "issue_refund", storyArgs(), nil)
	if first.Status != refund.Refunded {
		t.Fatalf("refund: %+v %q", first, text)
	}
	failed := ops.ProviderRecord{Provider: "stripe", Ref: first.RefundID, OperationID: first.OperationID, AmountCents: 3800, Currency: "usd", Status: "failed"}
	if _, err := e.ledger.ApplyRecord(context.Background(), e.db, failed, ops.Evidence{Kind: ops.EvidenceWebhook, Summary: "refund.updated"}, "webhook"); err != nil {
		t.Fatal(err)
	}
	_, a, text := call(t, cs, "refund_status", map[string]any{"operation_id": first.OperationID}, nil)
	if a.Status != refund.Failed || a.Reason != refund.ReasonFailedAfterSuccess || strings.Contains(text, "refused") {
		t.Fatalf("a refund that failed after Stripe accepted it is answered %+v %q; want reason %s", a, text, refund.ReasonFailedAfterSuccess)
	}
}
