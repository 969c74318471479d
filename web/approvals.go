package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// handleApprove carries out an operation's proposed close as a second person (ops rule 13).
func (s *Server) handleApprove(w http.ResponseWriter, r *http.Request) {
	dec, ok := s.decisionForm(w, r)
	if !ok {
		return
	}
	out, err := s.Desk.Approve(r.Context(), dec)
	if err != nil {
		s.afterCloseError(w, r, dec.OperationID, err)
		return
	}
	kind := "warn"
	if out.Outcome == desk.LookupClosed {
		kind = "ok"
	}
	s.putFlash(r.Context(), flashMsg{Kind: kind, Message: out.Message})
	http.Redirect(w, r, "/ops/"+url.PathEscape(dec.OperationID), http.StatusSeeOther)
}

// handleReject ends an operation's proposed close without closing it; a note says why.
func (s *Server) handleReject(w http.ResponseWriter, r *http.Request) {
	dec, ok := s.decisionForm(w, r)
	if !ok {
		return
	}
	pr, err := s.Desk.Reject(r.Context(), dec)
	if err != nil {
		s.afterCloseError(w, r, dec.OperationID, err)
		return
	}
	s.putFlash(r.Context(), flashMsg{Kind: "ok", Message: fmt.Sprintf("Rejected %s's proposal; nothing was closed.", pr.ProposedBy)})
	http.Redirect(w, r, "/ops/"+url.PathEscape(dec.OperationID), http.StatusSeeOther)
}

// decisionForm reads an approve or reject form as the signed-in person's decision on the
// proposal they saw.
func (s *Server) decisionForm(w http.ResponseWriter, r *http.Request) (desk.Decision, bool) {
	id, version, ok := s.closeForm(w, r)
	if !ok {
		return desk.Decision{}, false
	}
	pid, err := strconv.ParseInt(r.PostForm.Get("proposal_id"), 10, 64)
	if err != nil || pid <= 0 {
		s.Error(w, r, ops.Errorf(ops.EINVALID, "The form does not say which proposal you saw; reload the page and try again."))
		return desk.Decision{}, false
	}
	u := userFrom(r.Context())
	return desk.Decision{OperationID: id, Version: version, ProposalID: pid, By: u.Email, ByID: u.ID, Role: u.Role,
		Note: r.PostForm.Get("note")}, true
}

// fourEyesRefusals are the reasons a person may not propose or approve a close (ops rule
// 13), told on the operation's page rather than as an error page.
var fourEyesRefusals = map[string]bool{"self_approval": true, "sso_required": true, "vouched_account": true, "unknown_person": true}

// proposedFlash tells the proposer their close awaits a second person.
func proposedFlash(pr *ops.Proposal) flashMsg {
	return flashMsg{Kind: "warn", Message: fmt.Sprintf("Proposed: a second person must approve this close (%s). It awaits approval until %s.",
		pr.Why, formatTime(pr.ExpiresAt))}
}

// proposalView is the operation's latest proposal as viewer (account viewerID) sees it at
// now.
func proposalView(pr *ops.Proposal, op *ops.Operation, v views.Viewer, viewerID int64, now time.Time) *views.ProposalView {
	if pr == nil {
		return nil
	}
	state := pr.StateAt(now)
	if state == ops.ProposalOpen && op.Status.Final() {
		state = ops.ProposalSuperseded
	}
	p := &views.ProposalView{State: string(state), Awaiting: state == ops.ProposalOpen, Outcome: string(pr.To),
		What: proposalWhat(pr), ProviderRef: pr.ProviderRef, Note: pr.Note, Why: pr.Why, ProposedBy: pr.ProposedBy,
		ProposedAt: formatTime(pr.ProposedAt), ExpiresAt: formatTime(pr.ExpiresAt), ExpiresISO: pr.ExpiresAt.UTC().Format(time.RFC3339),
		DecidedBy: pr.DecidedBy, Decision: pr.Outcome, CanDecide: v.CanAct(), Own: pr.ProposedByID != 0 && pr.ProposedByID == viewerID,
		Version: strconv.FormatInt(op.Version, 10), ID: strconv.FormatInt(pr.ID, 10), URL: "/ops/" + url.PathEscape(op.ID)}
	if pr.DecidedAt != nil {
		p.DecidedAt = formatTime(*pr.DecidedAt)
	}
	if state == ops.ProposalSuperseded && p.Decision == "" {
		p.Decision = fmt.Sprintf("closed as %s by %s", op.Status, orSomeone(op.ClosedBy))
	}
	return p
}

func proposalWhat(pr *ops.Proposal) string {
	if pr.Kind == ops.CloseNotExecuted {
		return "close as not executed (" + string(pr.To) + ")"
	}
	return "close by hand as " + string(pr.To)
}

// awaitingLine is a queue row's note on its open proposal, or "" for none.
func awaitingLine(pr *ops.Proposal, now time.Time) string {
	if pr == nil || pr.StateAt(now) != ops.ProposalOpen {
		return ""
	}
	return fmt.Sprintf("%s proposed %s at %s: %s (expires %s)", pr.ProposedBy, proposalWhat(pr), formatTime(pr.ProposedAt),
		pr.Note, formatTime(pr.ExpiresAt))
}

// approvalNotes says on the close forms which closes would need a second person.
func approvalNotes(ctx context.Context, d Desk, op *ops.Operation, a *views.OpActions) {
	if need, why, err := d.ApprovalNeeded(ctx, op, ops.CloseManual); err == nil && need {
		a.ApprovalNote = why
	}
	if need, why, err := d.ApprovalNeeded(ctx, op, ops.CloseNotExecuted); err == nil && need {
		a.ApprovalNotExecuted = why
	}
}

// proposalTitles name a proposal's steps on the timeline.
var proposalTitles = map[string]string{
	"close.propose":    "Close proposed; awaits approval",
	"close.rejected":   "Proposed close rejected",
	"close.superseded": "Proposed close superseded",
}

// awaiting returns the open close proposals of a page of the queue, by operation id.
func (s *Server) awaiting(ctx context.Context, page []*ops.Operation) (map[string]*ops.Proposal, error) {
	if s.Desk == nil || len(page) == 0 {
		return nil, nil
	}
	ids := make([]string, len(page))
	for i, o := range page {
		ids[i] = o.ID
	}
	return s.Desk.AwaitingApproval(ctx, ids)
}
