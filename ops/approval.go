package ops

import (
	"context"
	"fmt"
	"time"
)

// DefaultApprovalTTL is how long a close proposal may be approved when nothing else is set.
const DefaultApprovalTTL = 24 * time.Hour

// CloseKind says which of a person's closes a proposal stands for.
type CloseKind string

// The closes by which a person asserts a money outcome (rule 13).
const (
	// CloseNotExecuted: a refund closed as failed because a fresh lookup found nothing past
	// the key retention (rule 11).
	CloseNotExecuted CloseKind = "not_executed"
	// CloseManual: an operation closed by hand as succeeded or failed with a note.
	CloseManual CloseKind = "manual"
)

// ApprovalPolicy says which closes a person may not make alone (rule 13).
type ApprovalPolicy struct {
	// MinCents, when set, is the amount from which a person's close needs a second person.
	MinCents *int64
	// NotExecuted makes every close as not executed need a second person, whatever the amount.
	NotExecuted bool
	// TTL is how long a proposal may be approved (DefaultApprovalTTL when 0).
	TTL time.Duration
}

// TenantApprovals is one tenant's override of the global ApprovalPolicy.
type TenantApprovals struct {
	TenantID int64
	// MinOff turns the amount threshold off for the tenant, whatever the global one.
	MinOff bool
	// MinCents, when set and MinOff is false, replaces the global threshold.
	MinCents *int64
	// NotExecuted, when set, replaces the global setting for closes as not executed.
	NotExecuted *bool
}

// For is the policy of a tenant: its own settings where it has some, the global ones
// elsewhere. A nil t is a tenant without settings of its own.
func (p ApprovalPolicy) For(t *TenantApprovals) ApprovalPolicy {
	if t == nil {
		return p
	}
	switch {
	case t.MinOff:
		p.MinCents = nil
	case t.MinCents != nil:
		p.MinCents = t.MinCents
	}
	if t.NotExecuted != nil {
		p.NotExecuted = *t.NotExecuted
	}
	return p
}

// ttl is the proposal lifetime, the default when none is set.
func (p ApprovalPolicy) ttl() time.Duration {
	if p.TTL > 0 {
		return p.TTL
	}
	return DefaultApprovalTTL
}

// ApprovalAmount is the amount in cents an operation's close asserts: its amount, or for an
// LLM operation without one, its recorded cost in cents (micro-units of the price table,
// rounded up), so a costly generation needs approval like a large refund. Nothing known
// counts as zero.
func ApprovalAmount(op *Operation) int64 {
	if op.AmountCents > 0 || (op.Kind != KindLLMCall && op.Kind != KindLLMJob) {
		return op.AmountCents
	}
	if op.CostMicros <= 0 {
		return 0
	}
	return (op.CostMicros + 9999) / 10000
}

// Needs says whether a person's close of kind on op needs a second person (rule 13), and
// if so why, in words shown to both people.
func (p ApprovalPolicy) Needs(op *Operation, kind CloseKind) (bool, string) {
	if kind == CloseNotExecuted && p.NotExecuted {
		return true, "every close as not executed needs a second person's approval"
	}
	if p.MinCents != nil && ApprovalAmount(op) >= *p.MinCents {
		return true, fmt.Sprintf("its amount (%s) is at or above the approval threshold (%s)",
			FormatMoney(ApprovalAmount(op), currencyOr(op.Currency)), FormatMoney(*p.MinCents, currencyOr(op.Currency)))
	}
	return false, ""
}

func currencyOr(c string) string {
	if c == "" {
		return "usd"
	}
	return c
}

// ProposalState is where a close proposal stands.
type ProposalState string

// The states of a close proposal. Expired is not stored while it is open: an open proposal
// past its end reads as expired (Proposal.StateAt).
const (
	ProposalOpen       ProposalState = "open"
	ProposalApproved   ProposalState = "approved"
	ProposalRejected   ProposalState = "rejected"
	ProposalSuperseded ProposalState = "superseded"
	ProposalExpired    ProposalState = "expired"
)

// Proposal is a person's close waiting for a second person (rule 13): the same form as the
// close itself, with who proposed it and until when it may be approved.
type Proposal struct {
	ID          int64
	OperationID string
	TenantID    int64
	Kind        CloseKind
	To          Status
	ProviderRef string
	Note        string
	// Why says why the close needs approval.
	Why string
	// ProposedBy is the proposer as records show them; ProposedByID is their dashboard
	// account, by which four-eyes tells people apart (0 for a proposal whose proposer is
	// unknown, which nobody may approve).
	ProposedBy   string
	ProposedByID int64
	ProposedAt   time.Time
	ExpiresAt    time.Time
	State        ProposalState
	DecidedBy    string
	DecidedAt    *time.Time
	// Outcome says how it ended: the reject note, or what closed the operation instead.
	Outcome string
}

// StateAt is the proposal's state at now: an open proposal past its end is expired.
func (p *Proposal) StateAt(now time.Time) ProposalState {
	if p.State == ProposalOpen && !now.Before(p.ExpiresAt) {
		return ProposalExpired
	}
	return p.State
}

// NewProposal is the proposal of a person's close under policy p at now; by names the
// proposer and byID is their dashboard account.
func (p ApprovalPolicy) NewProposal(op *Operation, kind CloseKind, to Status, ref, note, why, by string, byID int64, now time.Time) Proposal {
	return Proposal{OperationID: op.ID, TenantID: op.TenantID, Kind: kind, To: to, ProviderRef: ref, Note: note, Why: why,
		ProposedBy: by, ProposedByID: byID, ProposedAt: now, ExpiresAt: now.Add(p.ttl()), State: ProposalOpen}
}

// CheckApprove says why the account approverID may not approve pr at now (rule 13), or nil:
// only an open proposal before its end, with a known proposer, and never by the account that
// proposed it, whatever its role. Accounts are compared, never the emails they show; who
// may hold which account is the caller's to check.
func CheckApprove(pr *Proposal, approverID int64, now time.Time) error {
	switch st := pr.StateAt(now); {
	case st == ProposalExpired:
		return &Error{Code: EINVALID, Reason: "proposal_expired", Message: fmt.Sprintf(
			"The proposal expired at %s and can no longer be approved; propose the close again.", pr.ExpiresAt.UTC().Format(time.RFC3339))}
	case st == ProposalApproved:
		return &Error{Code: ECONFLICT, Reason: "proposal_approved", Message: fmt.Sprintf(
			"%s approved it first: closed as %s as %s proposed; nothing more was changed.", pr.DecidedBy, pr.To, pr.ProposedBy)}
	case st != ProposalOpen:
		return &Error{Code: ECONFLICT, Reason: "proposal_" + string(st), Message: fmt.Sprintf("The proposal is %s already; nothing was changed.", st)}
	case approverID == 0 || pr.ProposedByID == 0:
		return &Error{Code: EFORBIDDEN, Reason: "unknown_person", Message: "Four-eyes cannot tell who proposed or who approves this close, so it cannot be approved; propose it again while signed in."}
	case approverID == pr.ProposedByID:
		return &Error{Code: EFORBIDDEN, Reason: "self_approval", Message: "You proposed this close: a second person must approve it."}
	}
	return nil
}

// ProposalStore keeps close proposals and the tenants' approval settings.
type ProposalStore interface {
	// Propose records p as the operation's open proposal. An open proposal past its end is
	// marked expired first; one still open refuses p with ECONFLICT naming it.
	Propose(ctx context.Context, p Proposal, now time.Time) (*Proposal, error)
	// LatestProposal returns the operation's newest proposal, or nil when it has none.
	LatestProposal(ctx context.Context, opID string) (*Proposal, error)
	// OpenProposals returns the open proposals of the operations named, by operation id.
	OpenProposals(ctx context.Context, opIDs []string) (map[string]*Proposal, error)
	// DecideProposal moves an open proposal to state (rejected or superseded) with who
	// decided and why; a proposal no longer open is refused with ECONFLICT.
	DecideProposal(ctx context.Context, id int64, state ProposalState, by, outcome string, at time.Time) (*Proposal, error)
	// TenantApprovals returns a tenant's own settings, or nil when it has none.
	TenantApprovals(ctx context.Context, tenantID int64) (*TenantApprovals, error)
}
