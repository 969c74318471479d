package desk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
)

// approvalDesk is the desk of f with the global approval policy pol (ops rule 13).
func (f *fixture) approvalDesk(pol ops.ApprovalPolicy) *desk.Desk {
	return &desk.Desk{Ledger: f.ledger, Audit: deskstore.New(f.db), Events: f.db, Proposals: f.db, People: accountstore.New(f.db), Approvals: pol}
}

func cents(n int64) *int64 { return &n }

// account is the id of the dashboard account with email, a password account made on first
// use.
func (f *fixture) account(t *testing.T, email string) int64 {
	t.Helper()
	ctx := context.Background()
	var id int64
	err := f.db.Pool.QueryRow(ctx, `SELECT id FROM users WHERE email = $1`, email).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		u, cerr := accountstore.New(f.db).CreateUser(ctx, email, "correct horse battery", desk.RoleOncall)
		if cerr != nil {
			t.Fatal(cerr)
		}
		return u.ID
	} else if err != nil {
		t.Fatal(err)
	}
	return id
}

// closeByHand is who's close of op as succeeded with a provider record, op's own: a record
// another operation holds is refused.
func (f *fixture) closeByHand(t *testing.T, d *desk.Desk, op *ops.Operation, who string) (desk.CloseOutcome, error) {
	return d.CloseManually(context.Background(), desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
		ProviderRef: "re_seen_" + op.ID, Note: "Stripe's dashboard shows the refund.", Actor: who, ActorID: f.account(t, who)})
}

// decision is who's decision on op's latest proposal, as they see it now; who may name a
// role after a slash ("root@example.com/admin"), on-call otherwise.
func (f *fixture) decision(t *testing.T, d *desk.Desk, op *ops.Operation, who string) desk.Decision {
	t.Helper()
	pr, err := d.Proposal(context.Background(), op.ID)
	if err != nil || pr == nil {
		t.Fatalf("no proposal of %s: %v", op.ID, err)
	}
	email, role, ok := strings.Cut(who, "/")
	if !ok {
		role = string(desk.RoleOncall)
	}
	return desk.Decision{OperationID: op.ID, Version: op.Version, ProposalID: pr.ID, By: email, ByID: f.account(t, email), Role: desk.Role(role)}
}

func (f *fixture) approve(t *testing.T, d *desk.Desk, op *ops.Operation, who string) (desk.LookupOutcome, error) {
	return d.Approve(context.Background(), f.decision(t, d, op, who))
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
	// The close's outbox event is written for a consumer of it (ops rule 10).
	if err := f.db.RegisterOutboxConsumer(ctx, "test", 0, "", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	d := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(3800)})
	op := f.toUnknown(t, "a-1") // 3800 cents: at the threshold
	out, err := f.closeByHand(t, d, op, "alice@example.com")
	if err != nil || out.Proposal == nil {
		t.Fatalf("close at the threshold = %+v, %v; want a proposal", out, err)
	}
	if cur, _ := f.db.Get(ctx, op.ID); cur.Status != ops.StatusUnknown || cur.Version != op.Version {
		t.Fatalf("a proposal changed the operation: %s v%d", cur.Status, cur.Version)
	}
	if _, err := f.closeByHand(t, d, op, "carol@example.com"); ops.ErrorCode(err) != ops.ECONFLICT || !strings.Contains(ops.ErrorMessage(err), "alice@example.com proposed") {
		t.Fatalf("a second proposal while one is open = %v", err)
	}
	for _, role := range []desk.Role{desk.RoleOncall, desk.RoleAdmin} {
		_, err := d.Approve(ctx, f.decision(t, d, op, "alice@example.com/"+string(role)))
		if reasonOf(err) != "self_approval" || !strings.Contains(ops.ErrorMessage(err), "a second person must approve it") {
			t.Fatalf("self-approval as %s = %v, want refused", role, err)
		}
	}
	if _, err := d.Approve(ctx, f.decision(t, d, op, "admin@example.com/admin")); err == nil {
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

	small, err := f.seed().Open(ctx, f.refund("a-2", 3799), "req-2", "w1")
	if err != nil {
		t.Fatal(err)
	}
	lost, err := f.seed().Finish(ctx, small.Op, small.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeServerError, HTTPStatus: 500})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := f.closeByHand(t, d, lost, "alice@example.com"); err != nil || out.Proposal != nil || out.Op.Status != ops.StatusSucceeded {
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
	if _, err := f.closeByHand(t, d, op, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Hour)
	if _, err := f.approve(t, d, op, "bob@example.com"); reasonOf(err) != "proposal_expired" {
		t.Fatalf("approval after the TTL = %v", err)
	}
	if cur, _ := f.db.Get(ctx, op.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("an expired proposal closed the operation: %s", cur.Status)
	}
	if pr, _ := d.Proposal(ctx, op.ID); pr.StateAt(f.clock.Now()) != ops.ProposalExpired {
		t.Fatalf("proposal reads %s", pr.StateAt(f.clock.Now()))
	}
	out, err := f.closeByHand(t, d, op, "carol@example.com")
	if err != nil || out.Proposal == nil || out.Proposal.ProposedBy != "carol@example.com" {
		t.Fatalf("a new proposal after expiry = %+v, %v", out, err)
	}
	if _, err := f.approve(t, d, op, "bob@example.com"); err != nil {
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
	if _, err := f.closeByHand(t, d, op, "alice@example.com"); err != nil {
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
	_, err = f.approve(t, d, op, "bob@example.com")
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
	if out, err := f.closeByHand(t, off, f.toUnknown(t, "o-1"), "alice@example.com"); err != nil || out.Proposal == nil {
		t.Fatalf("tenant threshold under a global off = %+v, %v; want a proposal", out, err)
	}
	strict := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(0)})
	if _, err := f.db.SetTenantApprovals(ctx, "acme", ops.TenantApprovals{MinOff: true}, "cli", t0); err != nil {
		t.Fatal(err)
	}
	if out, err := f.closeByHand(t, strict, f.toUnknown(t, "o-2"), "alice@example.com"); err != nil || out.Proposal != nil {
		t.Fatalf("tenant off under a global threshold = %+v, %v; want closed", out, err)
	}
	if _, err := f.db.SetTenantApprovals(ctx, "acme", ops.TenantApprovals{}, "cli", t0); err != nil {
		t.Fatal(err)
	}
	if out, err := f.closeByHand(t, strict, f.toUnknown(t, "o-3"), "alice@example.com"); err != nil || out.Proposal == nil {
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
	if _, err := f.closeByHand(t, d, op, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	dec := f.decision(t, d, op, "bob@example.com")
	if _, err := d.Reject(ctx, dec); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("a reject without a note = %v", err)
	}
	dec.Note = "Stripe shows no such refund."
	if pr, err := d.Reject(ctx, dec); err != nil || pr.State != ops.ProposalRejected {
		t.Fatalf("reject = %+v, %v", pr, err)
	}
	if _, err := f.approve(t, d, op, "carol@example.com"); reasonOf(err) != "proposal_rejected" {
		t.Fatalf("approving a rejected proposal = %v", err)
	}
	if _, err := d.Approve(ctx, f.decision(t, d, op, "sam@example.com/support")); ops.ErrorCode(err) != ops.EFORBIDDEN {
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
	if _, err := f.closeByHand(t, d, op, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, who := range []string{"bob@example.com", "carol@example.com"} {
		dec := f.decision(t, d, op, who)
		go func() {
			_, err := d.Approve(ctx, dec)
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

// TestSecondApprovalSaysWhoApprovedFirst: a second person approving after the first is told
// who approved it and how it closed, as the proposal reads, and nothing changes again
// (ops rule 13).
func TestSecondApprovalSaysWhoApprovedFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	d := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(0)})
	op := f.toUnknown(t, "w-1")
	if _, err := f.closeByHand(t, d, op, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.approve(t, d, op, "bob@example.com"); err != nil {
		t.Fatal(err)
	}
	closed, _ := f.db.Get(ctx, op.ID)
	_, err := f.approve(t, d, op, "carol@example.com")
	want := "bob@example.com approved it first: closed as succeeded as alice@example.com proposed; nothing more was changed."
	if ops.ErrorCode(err) != ops.ECONFLICT || ops.ErrorMessage(err) != want {
		t.Fatalf("the second approval = %v, want %q", err, want)
	}
	if cur, _ := f.db.Get(ctx, op.ID); cur.Version != closed.Version {
		t.Fatalf("the second approval changed the operation: v%d, was v%d", cur.Version, closed.Version)
	}
	if pr, _ := d.Proposal(ctx, op.ID); pr.State != ops.ProposalApproved || pr.DecidedBy != "bob@example.com" {
		t.Fatalf("proposal after the second approval = %s by %s", pr.State, pr.DecidedBy)
	}
}

// TestApproveRefusesReplacedProposal: an approval or a rejection names the proposal its
// person saw. Once that proposal is withdrawn and another made, both are refused and change
// nothing, and the close's compare-and-set, given the withdrawn proposal, closes nothing
// either (ops rule 13).
func TestApproveRefusesReplacedProposal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	d := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(0)})
	op := f.toUnknown(t, "x-1")
	propose := func(ref string) {
		t.Helper()
		if _, err := d.CloseManually(ctx, desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, ProviderRef: ref,
			Note: "Stripe shows " + ref + ".", Actor: "alice@example.com", ActorID: f.account(t, "alice@example.com")}); err != nil {
			t.Fatal(err)
		}
	}
	propose("re_shown")
	seen := f.decision(t, d, op, "bob@example.com")
	withdraw := f.decision(t, d, op, "alice@example.com")
	withdraw.Note = "Wrong record."
	if _, err := d.Reject(ctx, withdraw); err != nil {
		t.Fatal(err)
	}
	propose("re_other")

	if _, err := d.Approve(ctx, seen); reasonOf(err) != "proposal_replaced" ||
		ops.ErrorMessage(err) != "The proposal you saw was withdrawn or replaced; nothing was changed." {
		t.Fatalf("approving the withdrawn proposal = %v", err)
	}
	seen.Note = "No."
	if _, err := d.Reject(ctx, seen); reasonOf(err) != "proposal_replaced" {
		t.Fatalf("rejecting the withdrawn proposal = %v", err)
	}
	blind := f.decision(t, d, op, "bob@example.com")
	blind.ProposalID = 0
	if _, err := d.Approve(ctx, blind); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("an approval that names no proposal = %v", err)
	}
	_, err := f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "alice@example.com",
		Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: "re_other", Summary: "approved"},
		Approval: &ops.Approval{ProposalID: seen.ProposalID, ProposedBy: "alice@example.com", ApprovedBy: "bob@example.com",
			ProposerID: f.account(t, "alice@example.com"), ApproverID: seen.ByID}})
	if ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("a close carrying the withdrawn proposal = %v", err)
	}
	if cur, _ := f.db.Get(ctx, op.ID); cur.Status != ops.StatusUnknown || cur.Version != op.Version {
		t.Fatalf("the operation changed: %s v%d", cur.Status, cur.Version)
	}
	if pr, _ := d.Proposal(ctx, op.ID); pr.State != ops.ProposalOpen || pr.ProviderRef != "re_other" {
		t.Fatalf("the newer proposal is %s with %s", pr.State, pr.ProviderRef)
	}
	if out, err := f.approve(t, d, op, "bob@example.com"); err != nil || out.Op.ProviderRef != "re_other" {
		t.Fatalf("approving the proposal seen = %+v, %v", out, err)
	}
}

// TestFourEyesComparesPeopleNotAccounts: accounts are compared, never the emails they show;
// with single sign-on configured, a close that needs approval is proposed and approved only
// by people of its identity provider, so one person's password account and SSO identity
// cannot be the two people (ops rule 13).
func TestFourEyesComparesPeopleNotAccounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const issuer = "https://idp.example.com"
	sso := func(subject, email string) int64 {
		t.Helper()
		in, err := accountstore.New(f.db).SignInExternal(ctx, desk.ExternalIdentity{Issuer: issuer, Subject: subject, Email: email}, desk.RoleOncall, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return in.User.ID
	}
	patSSO, bobSSO := sso("pat", "patricia@example.com"), sso("bob", "bob@example.com")
	patPassword := f.account(t, "pat@example.com")
	plain := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(0)})
	d := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(0)})
	d.SSOIssuer = issuer
	closeAs := func(d *desk.Desk, op *ops.Operation, who string, id int64) error {
		_, err := d.CloseManually(ctx, desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
			ProviderRef: "re_seen", Note: "Stripe shows it.", Actor: who, ActorID: id})
		return err
	}
	decide := func(d *desk.Desk, op *ops.Operation, who string, id int64) desk.Decision {
		dec := f.decision(t, d, op, "bob@example.com")
		dec.By, dec.ByID = who, id
		return dec
	}

	// Without single sign-on, the account decides, whatever email the approver shows.
	op := f.toUnknown(t, "p-1")
	if err := closeAs(plain, op, "pat@example.com", patPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Approve(ctx, decide(plain, op, "someone-else@example.com", patPassword)); reasonOf(err) != "self_approval" {
		t.Fatalf("the proposer's account under another name = %v", err)
	}

	// With it, the password account neither approves that proposal nor proposes.
	if _, err := d.Approve(ctx, decide(d, op, "patricia@example.com", patSSO)); reasonOf(err) != "sso_required" ||
		!strings.Contains(ops.ErrorMessage(err), "pat@example.com proposed this close with a password account") {
		t.Fatalf("approving a password account's proposal = %v", err)
	}
	op2 := f.toUnknown(t, "p-2")
	if err := closeAs(d, op2, "pat@example.com", patPassword); reasonOf(err) != "sso_required" {
		t.Fatalf("a password account's proposal = %v", err)
	}
	if pr, _ := d.Proposal(ctx, op2.ID); pr != nil {
		t.Fatalf("a password account proposed %+v", pr)
	}
	if err := closeAs(d, op2, "patricia@example.com", patSSO); err != nil {
		t.Fatal(err)
	}
	for _, try := range []struct {
		who    string
		id     int64
		reason string
	}{{"pat@example.com", patPassword, "sso_required"}, {"patricia@example.com", patSSO, "self_approval"}} {
		if _, err := d.Approve(ctx, decide(d, op2, try.who, try.id)); reasonOf(err) != try.reason {
			t.Fatalf("%s approving = %v, want %s", try.who, err, try.reason)
		}
	}
	if cur, _ := f.db.Get(ctx, op2.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("one person's two accounts closed it as %s", cur.Status)
	}
	if out, err := d.Approve(ctx, decide(d, op2, "bob@example.com", bobSSO)); err != nil || out.Op.Status != ops.StatusSucceeded {
		t.Fatalf("a second person of the identity provider = %+v, %v", out, err)
	}
}

// TestApprovalRefusedToWhoVouchedForTheAccount: the admin who created the proposer's account,
// or re-enabled it, within a proposal's lifetime before the proposal or since, cannot
// approve it; anyone else can, and so can that admin once the account is older than that
// (ops rule 13).
func TestApprovalRefusedToWhoVouchedForTheAccount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	d := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(0), TTL: time.Hour})
	f.account(t, "root@example.com")
	puppet := f.account(t, "puppet@example.com")
	if err := deskstore.New(f.db).RecordAudit(ctx, desk.AuditLogEntry{At: f.clock.Now(), Actor: "root@example.com", Action: "user.add",
		Entity: "user", EntityID: strconv.FormatInt(puppet, 10)}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(59 * time.Minute)
	op := f.toUnknown(t, "v-1")
	if _, err := f.closeByHand(t, d, op, "puppet@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.approve(t, d, op, "root@example.com/admin"); reasonOf(err) != "vouched_account" ||
		!strings.Contains(ops.ErrorMessage(err), "You created puppet@example.com's account at") {
		t.Fatalf("the admin who created the account approving = %v", err)
	}
	if _, err := f.approve(t, d, op, "carol@example.com"); err != nil {
		t.Fatalf("another person approving: %v", err)
	}

	f.clock.Advance(2 * time.Minute) // the account is older than a proposal's lifetime now
	op = f.toUnknown(t, "v-2")
	if _, err := f.closeByHand(t, d, op, "puppet@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.approve(t, d, op, "root@example.com/admin"); err != nil {
		t.Fatalf("approving after the account's first hour: %v", err)
	}

	op = f.toUnknown(t, "v-3")
	if _, err := f.closeByHand(t, d, op, "puppet@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := accountstore.New(f.db).SetUserDisabled(ctx, puppet, true, "root@example.com", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := accountstore.New(f.db).SetUserDisabled(ctx, puppet, false, "ROOT@example.com", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.approve(t, d, op, "root@example.com/admin"); reasonOf(err) != "vouched_account" ||
		!strings.Contains(ops.ErrorMessage(err), "You re-enabled puppet@example.com's account") {
		t.Fatalf("the admin who re-enabled the account approving = %v", err)
	}
	if cur, _ := f.db.Get(ctx, op.ID); cur.Status != ops.StatusUnknown {
		t.Fatalf("the refused approval closed it as %s", cur.Status)
	}
}
