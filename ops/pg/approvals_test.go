package pg_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// approvalDesk is the desk of f with the global approval policy pol (ops rule 13).
func (f *fixture) approvalDesk(pol ops.ApprovalPolicy) *desk.Desk {
	return &desk.Desk{Ledger: f.ledger, Audit: f.db, Events: f.db, Proposals: f.db, Approvals: pol}
}

func cents(n int64) *int64 { return &n }

// closeByHand is a person's close of op as succeeded with a provider record.
func closeByHand(d *desk.Desk, op *ops.Operation, who string) (desk.CloseOutcome, error) {
	return d.CloseManually(context.Background(), desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
		ProviderRef: "re_seen_in_stripe", Note: "Stripe's dashboard shows the refund.", Actor: who})
}

func approve(d *desk.Desk, op *ops.Operation, who string) (desk.LookupOutcome, error) {
	return d.Approve(context.Background(), desk.Decision{OperationID: op.ID, Version: op.Version, By: who, Role: desk.RoleOncall})
}

func reasonOf(err error) string { return ops.ErrorReason(err) }

// TestApprovalAboveThresholdNeedsASecondPerson: a close by hand at or above the threshold
// becomes a proposal and changes nothing; its proposer cannot approve it; a second person's
// approval closes it with both names in the audit row and the outbox event. Below the
// threshold the close goes through at once.
func TestApprovalAboveThresholdNeedsASecondPerson(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	d := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(3800)})
	op := f.toUnknown(t, "a-1") // 3800 cents: at the threshold
	out, err := closeByHand(d, op, "alice@example.com")
	if err != nil || out.Proposal == nil {
		t.Fatalf("close at the threshold = %+v, %v; want a proposal", out, err)
	}
	if cur, _ := f.db.Get(ctx, op.ID); cur.Status != ops.StatusUnknown || cur.Version != op.Version {
		t.Fatalf("a proposal changed the operation: %s v%d", cur.Status, cur.Version)
	}
	if _, err := closeByHand(d, op, "carol@example.com"); ops.ErrorCode(err) != ops.ECONFLICT || !strings.Contains(ops.ErrorMessage(err), "alice@example.com proposed") {
		t.Fatalf("a second proposal while one is open = %v", err)
	}
	for _, role := range []desk.Role{desk.RoleOncall, desk.RoleAdmin} {
		_, err := d.Approve(ctx, desk.Decision{OperationID: op.ID, Version: op.Version, By: "alice@example.com", Role: role})
		if reasonOf(err) != "self_approval" || !strings.Contains(ops.ErrorMessage(err), "a second person must approve it") {
			t.Fatalf("self-approval as %s = %v, want refused", role, err)
		}
	}
	if _, err := d.Approve(ctx, desk.Decision{OperationID: op.ID, Version: op.Version, By: "admin@example.com", Role: desk.RoleAdmin}); err == nil {
		res, _ := f.db.Get(ctx, op.ID)
		if res.ClosedBy != "alice@example.com" {
			t.Fatalf("closed by %q", res.ClosedBy)
		}
	} else {
		t.Fatalf("an admin's approval: %v", err)
	}
	var after, payload []byte
	var actor string
	if err := f.db.Pool.QueryRow(ctx, `SELECT actor, after FROM audit_log WHERE entity_id = $1 AND action = 'close'`, op.ID).Scan(&actor, &after); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Pool.QueryRow(ctx, `SELECT payload FROM outbox WHERE entity_id = $1 AND topic = 'operation.succeeded'`, op.ID).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	for what, b := range map[string][]byte{"audit row": after, "outbox event": payload} {
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil || v["proposed_by"] != "alice@example.com" || v["approved_by"] != "admin@example.com" {
			t.Errorf("%s = %s, want both names", what, b)
		}
	}
	if pr, _ := d.Proposal(ctx, op.ID); pr.State != ops.ProposalApproved || pr.DecidedBy != "admin@example.com" {
		t.Errorf("proposal after approval = %+v", pr)
	}

	small, err := f.ledger.Open(ctx, f.refund("a-2", 3799), "req-2", "w1")
	if err != nil {
		t.Fatal(err)
	}
	lost, _, err := f.ledger.FinishAttempt(ctx, small.Op, small.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeServerError, HTTPStatus: 500})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := closeByHand(d, lost, "alice@example.com"); err != nil || out.Proposal != nil || out.Op.Status != ops.StatusSucceeded {
		t.Fatalf("close below the threshold = %+v, %v; want closed at once", out, err)
	}
}

// TestApprovalExpiresAfterTTL: past its TTL a proposal cannot be approved, reads as expired,
// and a newer proposal may be made.
func TestApprovalExpiresAfterTTL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	d := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(0), TTL: time.Hour})
	op := f.toUnknown(t, "e-1")
	if _, err := closeByHand(d, op, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Hour)
	if _, err := approve(d, op, "bob@example.com"); reasonOf(err) != "proposal_expired" {
		t.Fatalf("approval after the TTL = %v", err)
	}
	if cur, _ := f.db.Get(ctx, op.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("an expired proposal closed the operation: %s", cur.Status)
	}
	if pr, _ := d.Proposal(ctx, op.ID); pr.StateAt(f.clock.Now()) != ops.ProposalExpired {
		t.Fatalf("proposal reads %s", pr.StateAt(f.clock.Now()))
	}
	out, err := closeByHand(d, op, "carol@example.com")
	if err != nil || out.Proposal == nil || out.Proposal.ProposedBy != "carol@example.com" {
		t.Fatalf("a new proposal after expiry = %+v, %v", out, err)
	}
	if _, err := approve(d, op, "bob@example.com"); err != nil {
		t.Fatalf("approving the new proposal: %v", err)
	}
}

// TestApprovalSupersededWhenClosedMeanwhile: a close by anyone else while a proposal is open
// (here a process with the provider's record) supersedes it; the approval then fails with
// who closed it and changes nothing.
func TestApprovalSupersededWhenClosedMeanwhile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	d := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(100)})
	op := f.toUnknown(t, "s-1")
	if _, err := closeByHand(d, op, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	closed, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "reconciler",
		Evidence: ops.Evidence{Kind: ops.EvidenceReconciliation, ProviderRef: "re_from_listing", Summary: "listed"}})
	if err != nil {
		t.Fatal(err)
	}
	if pr, _ := d.Proposal(ctx, op.ID); pr.State != ops.ProposalSuperseded || !strings.Contains(pr.Outcome, "by reconciler") {
		t.Fatalf("proposal after another close = %+v", pr)
	}
	_, err = approve(d, op, "bob@example.com")
	var e *ops.Error
	if !errors.As(err, &e) || e.Closed == nil || !strings.Contains(e.Message, "Already closed as succeeded by reconciler") {
		t.Fatalf("approval after the close = %v", err)
	}
	if cur, _ := f.db.Get(ctx, op.ID); cur.Version != closed.Version || cur.ProviderRef != "re_from_listing" {
		t.Fatalf("the approval changed the operation: v%d %s", cur.Version, cur.ProviderRef)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = 'close'`, op.ID); n != 1 {
		t.Fatalf("%d close rows, want 1", n)
	}
}

// TestTenantApprovalsOverrideGlobal: a tenant's own threshold, or its "off", wins over the
// global policy either way; "default" follows it again.
func TestTenantApprovalsOverrideGlobal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	off := f.approvalDesk(ops.ApprovalPolicy{})
	if _, err := f.db.SetTenantApprovals(ctx, "acme", ops.TenantApprovals{MinCents: cents(1000)}, "cli", t0); err != nil {
		t.Fatal(err)
	}
	if out, err := closeByHand(off, f.toUnknown(t, "o-1"), "alice@example.com"); err != nil || out.Proposal == nil {
		t.Fatalf("tenant threshold under a global off = %+v, %v; want a proposal", out, err)
	}
	strict := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(0)})
	if _, err := f.db.SetTenantApprovals(ctx, "acme", ops.TenantApprovals{MinOff: true}, "cli", t0); err != nil {
		t.Fatal(err)
	}
	if out, err := closeByHand(strict, f.toUnknown(t, "o-2"), "alice@example.com"); err != nil || out.Proposal != nil {
		t.Fatalf("tenant off under a global threshold = %+v, %v; want closed", out, err)
	}
	if _, err := f.db.SetTenantApprovals(ctx, "acme", ops.TenantApprovals{}, "cli", t0); err != nil {
		t.Fatal(err)
	}
	if out, err := closeByHand(strict, f.toUnknown(t, "o-3"), "alice@example.com"); err != nil || out.Proposal == nil {
		t.Fatalf("tenant default under a global threshold = %+v, %v; want a proposal", out, err)
	}
	if _, err := f.db.SetTenantApprovals(ctx, "nobody", ops.TenantApprovals{}, "cli", t0); ops.ErrorCode(err) != ops.ENOTFOUND {
		t.Fatalf("an unknown tenant = %v", err)
	}
}

// TestRejectNeedsNoteAndLeavesOperationOpen: a rejection with a note ends the proposal and
// changes nothing; approving it afterwards is refused.
func TestRejectNeedsNoteAndLeavesOperationOpen(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	d := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(0)})
	op := f.toUnknown(t, "r-1")
	if _, err := closeByHand(d, op, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	dec := desk.Decision{OperationID: op.ID, Version: op.Version, By: "bob@example.com", Role: desk.RoleOncall}
	if _, err := d.Reject(ctx, dec); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("a reject without a note = %v", err)
	}
	dec.Note = "Stripe shows no such refund."
	if pr, err := d.Reject(ctx, dec); err != nil || pr.State != ops.ProposalRejected {
		t.Fatalf("reject = %+v, %v", pr, err)
	}
	if _, err := approve(d, op, "carol@example.com"); reasonOf(err) != "proposal_rejected" {
		t.Fatalf("approving a rejected proposal = %v", err)
	}
	if _, err := d.Approve(ctx, desk.Decision{OperationID: op.ID, Version: op.Version, By: "sam@example.com", Role: desk.RoleSupport}); ops.ErrorCode(err) != ops.EFORBIDDEN {
		t.Fatalf("support approving = %v", err)
	}
	if cur, _ := f.db.Get(ctx, op.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("operation is %s", cur.Status)
	}
}

// TestTwoApproversAtOnceCloseOnce: two people approve one proposal at the same moment; the
// operation closes once, the proposal is approved by the winner, and the other is told.
func TestTwoApproversAtOnceCloseOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	d := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(0)})
	op := f.toUnknown(t, "t-1")
	if _, err := closeByHand(d, op, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, who := range []string{"bob@example.com", "carol@example.com"} {
		go func() {
			_, err := approve(d, op, who)
			errs <- err
		}()
	}
	var failed []error
	for range 2 {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) != 1 || ops.ErrorCode(failed[0]) != ops.ECONFLICT {
		t.Fatalf("approvals at once ended with %v, want one conflict", failed)
	}
	if n := f.count(t, `SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = 'close'`, op.ID); n != 1 {
		t.Fatalf("%d close rows, want 1", n)
	}
	if pr, _ := d.Proposal(ctx, op.ID); pr.State != ops.ProposalApproved {
		t.Fatalf("proposal is %s", pr.State)
	}
}
