package desk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Decision is a second person's answer to a proposed close (ops rule 13).
type Decision struct {
	OperationID string
	// Version is the operation's version the person saw: a changed operation refuses the
	// approval instead of closing something they did not see.
	Version int64
	// ProposalID is the proposal the person saw. Proposing or withdrawing leaves the
	// operation's version as it was, so without it an approval could carry out a proposal
	// that replaced the one they read.
	ProposalID int64
	// By names the person in the records; ByID is their dashboard account, by which
	// four-eyes tells people apart.
	By   string
	ByID int64
	Role Role
	// Note says why; a rejection needs one.
	Note string
}

// policyFor is the approval policy of op's tenant: its own settings over the global ones.
func (d *Desk) policyFor(ctx context.Context, op *ops.Operation) (ops.ApprovalPolicy, error) {
	if d.Proposals == nil {
		return ops.ApprovalPolicy{}, nil
	}
	t, err := d.Proposals.TenantApprovals(ctx, op.TenantID)
	if err != nil {
		return ops.ApprovalPolicy{}, fmt.Errorf("read tenant approvals: %w", err)
	}
	return d.Approvals.For(t), nil
}

// ApprovalNeeded says whether a person's close of kind on op would need a second person
// (ops rule 13), and why, so the form can say so before it is sent.
func (d *Desk) ApprovalNeeded(ctx context.Context, op *ops.Operation, kind ops.CloseKind) (bool, string, error) {
	pol, err := d.policyFor(ctx, op)
	if err != nil {
		return false, "", err
	}
	need, why := pol.Needs(op, kind)
	return need, why, nil
}

// proposeIfNeeded records the close of actor (account actorID) as a proposal when the
// tenant's policy asks for a second person (ops rule 13), and returns it; nil when the
// close may go ahead now.
func (d *Desk) proposeIfNeeded(ctx context.Context, op *ops.Operation, kind ops.CloseKind, to ops.Status, ref, note, actor string, actorID int64) (*ops.Proposal, error) {
	pol, err := d.policyFor(ctx, op)
	if err != nil {
		return nil, err
	}
	need, why := pol.Needs(op, kind)
	if !need {
		return nil, nil
	}
	if err := d.checkProposer(ctx, actorID, why); err != nil {
		return nil, err
	}
	now := d.Ledger.Clock.Now()
	return d.Proposals.Propose(ctx, pol.NewProposal(op, kind, to, ref, note, why, actor, actorID, now), now)
}

// proposedOutcome is a close as not executed that became a proposal.
func proposedOutcome(out LookupOutcome, pr *ops.Proposal) LookupOutcome {
	if pr == nil {
		return out
	}
	out.Proposal, out.Outcome = pr, LookupProposed
	out.Message = fmt.Sprintf("A second person must approve this close (%s): it awaits approval until %s.",
		pr.Why, pr.ExpiresAt.UTC().Format(time.RFC3339))
	return out
}

// approvedLine names both people in the evidence of an approved close.
func approvedLine(a *ops.Approval) string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf(" [Proposed by %s, approved by %s.]", a.ProposedBy, a.ApprovedBy)
}

// closer is who the ledger records as closing: the proposer of an approved close.
func closer(actor string, a *ops.Approval) string {
	if a != nil {
		return a.ProposedBy
	}
	return actor
}

// checkManual runs the ledger's checks of a close by hand before it is proposed, so no
// proposal is made that its approval could never carry out.
func (d *Desk) checkManual(ctx context.Context, op *ops.Operation, p ManualClose) error {
	if op.Version != p.Version {
		return ops.Errorf(ops.ECONFLICT, "Operation %s changed since you looked; reload the page and check again.", op.ID)
	}
	now := d.Ledger.Clock.Now()
	ev := ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: p.ProviderRef, Summary: p.Note}
	if err := ops.CheckClose(op, p.To, ev, now); err != nil {
		return err
	}
	if p.To != ops.StatusFailed {
		return nil
	}
	attempts, err := d.Ledger.Attempts(ctx, op.ID)
	if err != nil {
		return err
	}
	return ops.CheckFail(op, attempts, ev, op.Policy, now, d.Ledger.Limits)
}

// Proposal returns the operation's newest close proposal, or nil when it has none.
func (d *Desk) Proposal(ctx context.Context, opID string) (*ops.Proposal, error) {
	if d.Proposals == nil {
		return nil, nil
	}
	return d.Proposals.LatestProposal(ctx, opID)
}

// AwaitingApproval returns the open proposals of the operations named, by operation id.
func (d *Desk) AwaitingApproval(ctx context.Context, opIDs []string) (map[string]*ops.Proposal, error) {
	if d.Proposals == nil {
		return nil, nil
	}
	return d.Proposals.OpenProposals(ctx, opIDs)
}

// openProposal returns op's proposal that a decision applies to, checking who decides and
// that it is the proposal they saw: the operation's latest.
func (d *Desk) openProposal(ctx context.Context, dec Decision) (*ops.Proposal, *ops.Operation, error) {
	if d.Proposals == nil {
		return nil, nil, ops.Errorf(ops.EUNAVAILABLE, "Approvals are not configured on this server.")
	}
	if !dec.Role.AtLeast(RoleOncall) {
		return nil, nil, ops.Errorf(ops.EFORBIDDEN, "Approving or rejecting a close needs the on-call role or above.")
	}
	if dec.ProposalID <= 0 {
		return nil, nil, ops.Errorf(ops.EINVALID, "The form does not say which proposal you saw; reload the page and try again.")
	}
	pr, err := d.Proposals.LatestProposal(ctx, dec.OperationID)
	if err != nil {
		return nil, nil, err
	}
	if pr == nil {
		return nil, nil, ops.Errorf(ops.ENOTFOUND, "No close of operation %s awaits approval.", dec.OperationID)
	}
	if pr.ID != dec.ProposalID {
		return nil, nil, errReplaced()
	}
	op, err := d.Ledger.Get(ctx, dec.OperationID)
	if err != nil {
		return nil, nil, err
	}
	return pr, op, nil
}

// Approve carries out the operation's open proposal as its proposer's close, approved by
// dec.By (ops rule 13). The close runs every check of a close made now (ops rules 6 and 11:
// a close as not executed looks the refund up again), and applies only while the proposal
// is open, marking it approved in the same transaction. An operation closed meanwhile
// supersedes the proposal, and the error names who closed it.
func (d *Desk) Approve(ctx context.Context, dec Decision) (LookupOutcome, error) {
	pr, op, err := d.openProposal(ctx, dec)
	if err != nil {
		return LookupOutcome{}, err
	}
	if op.Status.Final() {
		return LookupOutcome{}, d.supersede(ctx, pr, op)
	}
	if err := ops.CheckApprove(pr, dec.ByID, d.Ledger.Clock.Now()); err != nil {
		return LookupOutcome{}, err
	}
	if err := d.checkApprover(ctx, pr, dec.ByID); err != nil {
		return LookupOutcome{}, err
	}
	if op.Version != dec.Version {
		return LookupOutcome{}, ops.Errorf(ops.ECONFLICT, "Operation %s changed since you looked; reload the page and check again.", op.ID)
	}
	// The close applies only while this proposal, the one the approver saw, is open.
	ap := &ops.Approval{ProposalID: pr.ID, ProposedBy: pr.ProposedBy, ApprovedBy: dec.By, ProposerID: pr.ProposedByID, ApproverID: dec.ByID}
	var out LookupOutcome
	if pr.Kind == ops.CloseNotExecuted {
		out, err = d.closeNotExecuted(ctx, op, NotExecutedClose{Version: op.Version, Note: pr.Note, Actor: dec.By}, ap)
	} else {
		out.Op, err = d.closeManual(ctx, op, ManualClose{ID: op.ID, Version: op.Version, To: pr.To, ProviderRef: pr.ProviderRef,
			Note: pr.Note, Actor: pr.ProposedBy}, ap)
		if err == nil {
			out.Outcome, out.Message = LookupClosed, fmt.Sprintf("Closed as %s.", out.Op.Status)
		}
	}
	switch {
	case err != nil:
		return out, d.approvalFailed(ctx, pr, err)
	case out.Outcome == LookupAlreadyClosed && out.Op != nil:
		return out, d.supersede(ctx, pr, out.Op)
	case out.Outcome == LookupClosed && out.Op.Status != pr.To:
		out.Message += " The proposal was superseded: the fresh lookup closed it with the provider's record."
	case out.Outcome == LookupClosed:
		out.Message = fmt.Sprintf("Approved: closed as %s as %s proposed.", out.Op.Status, pr.ProposedBy)
	}
	return out, nil
}

// errReplaced refuses a decision on a proposal that is no longer the operation's latest.
func errReplaced() error {
	return &ops.Error{Code: ops.ECONFLICT, Reason: "proposal_replaced", Message: "The proposal you saw was withdrawn or replaced; nothing was changed."}
}

// approvalFailed explains why an approval changed nothing: an operation closed meanwhile
// supersedes the proposal; a proposal decided or replaced meanwhile says how.
func (d *Desk) approvalFailed(ctx context.Context, pr *ops.Proposal, err error) error {
	var e *ops.Error
	if errors.As(err, &e) && e.Closed != nil {
		if cur, gerr := d.Ledger.Get(ctx, pr.OperationID); gerr == nil {
			return d.supersede(ctx, pr, cur)
		}
		return err
	}
	if ops.ErrorCode(err) == ops.ECONFLICT {
		if cur, rerr := d.Proposals.LatestProposal(ctx, pr.OperationID); rerr == nil && cur != nil && cur.ID != pr.ID {
			return errReplaced()
		} else if rerr == nil && cur != nil {
			if st := cur.StateAt(d.Ledger.Clock.Now()); st != ops.ProposalOpen {
				return ops.Errorf(ops.ECONFLICT, "The proposal is %s; nothing was changed.", st)
			}
		}
	}
	return err
}

// supersede marks pr superseded by op's close, unless it was decided already, and returns
// the error that tells the approver what became of it: who approved it first, or who
// closed the operation instead.
func (d *Desk) supersede(ctx context.Context, pr *ops.Proposal, op *ops.Operation) error {
	closed := ops.AlreadyClosed(op)
	now := d.Ledger.Clock.Now()
	st := pr.StateAt(now)
	if st == ops.ProposalOpen {
		outcome := fmt.Sprintf("closed as %s by %s", op.Status, op.ClosedBy)
		_, err := d.Proposals.DecideProposal(ctx, pr.ID, ops.ProposalSuperseded, op.ClosedBy, outcome, now)
		switch {
		case err == nil:
			st = ops.ProposalSuperseded
		case ops.ErrorCode(err) == ops.ECONFLICT:
			// Decided meanwhile: another approver's approval of it may have made this close.
			if cur, rerr := d.Proposals.LatestProposal(ctx, pr.OperationID); rerr == nil && cur != nil && cur.ID == pr.ID {
				pr, st = cur, cur.StateAt(now)
			}
		default:
			return err
		}
	}
	switch st {
	case ops.ProposalApproved:
		msg := fmt.Sprintf("%s approved it first: closed as %s as %s proposed; nothing more was changed.", pr.DecidedBy, pr.To, pr.ProposedBy)
		if op.Status != pr.To {
			msg += fmt.Sprintf(" It is %s now.", op.Status)
		}
		return &ops.Error{Code: ops.ECONFLICT, Closed: closed.Closed, Reason: "proposal_approved", Message: msg}
	case ops.ProposalRejected, ops.ProposalExpired:
		return &ops.Error{Code: ops.ECONFLICT, Closed: closed.Closed, Reason: "proposal_" + string(st), Message: fmt.Sprintf(
			"Already closed as %s by %s; the proposal was %s, and nothing was changed.", op.Status, orSomeone(op.ClosedBy), st)}
	}
	return &ops.Error{Code: ops.ECONFLICT, Closed: closed.Closed, Reason: "proposal_superseded",
		Message: fmt.Sprintf("Already closed as %s by %s; the proposal is superseded and nothing was changed.", op.Status, orSomeone(op.ClosedBy))}
}

func orSomeone(s string) string {
	if s == "" {
		return "someone else"
	}
	return s
}

// Reject closes the operation's open proposal without closing the operation; the note
// says why. The proposer may withdraw their own proposal this way.
func (d *Desk) Reject(ctx context.Context, dec Decision) (*ops.Proposal, error) {
	if strings.TrimSpace(dec.Note) == "" {
		return nil, ops.Errorf(ops.EINVALID, "Write a note that says why you reject the proposal.")
	}
	note, err := checkNote(dec.Note)
	if err != nil {
		return nil, err
	}
	pr, op, err := d.openProposal(ctx, dec)
	if err != nil {
		return nil, err
	}
	if op.Status.Final() {
		return nil, d.supersede(ctx, pr, op)
	}
	if st := pr.StateAt(d.Ledger.Clock.Now()); st != ops.ProposalOpen {
		return nil, ops.Errorf(ops.ECONFLICT, "The proposal is %s already; nothing was changed.", st)
	}
	return d.Proposals.DecideProposal(ctx, pr.ID, ops.ProposalRejected, dec.By, note, d.Ledger.Clock.Now())
}
