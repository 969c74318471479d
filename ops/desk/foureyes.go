package desk

import (
	"context"
	"fmt"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Person is a dashboard account as four-eyes sees it (ops rule 13): accounts are told
// apart by ID, and an identity provider's person by issuer and subject; Email is only
// what to show.
type Person struct {
	ID    int64
	Email string
	// Issuer and Subject name the identity provider's person who signs in to the account;
	// both are empty for a password account.
	Issuer  string
	Subject string
}

// signsInThrough reports whether the account belongs to a person of the identity provider
// issuer.
func (p Person) signsInThrough(issuer string) bool {
	return issuer != "" && p.Issuer == issuer && p.Subject != ""
}

// samePerson reports whether two accounts are one person as far as Settle can know: one
// account, or two holding one identity of one provider.
func samePerson(a, b Person) bool {
	return a.ID == b.ID || (a.Subject != "" && a.Issuer == b.Issuer && a.Subject == b.Subject)
}

// AccountChange is an admin's vouching for an account: creating or re-enabling it.
type AccountChange struct {
	// By is the account of the admin who made the change.
	By int64
	// Action is user.add or user.enable, as the audit log records it.
	Action string
	At     time.Time
}

// People tells four-eyes who holds the dashboard's accounts (ops rule 13).
type People interface {
	// Person returns the account with id, disabled or not, or ENOTFOUND.
	Person(ctx context.Context, id int64) (Person, error)
	// AccountVouchers returns who created or re-enabled account id at or after since, as
	// the audit log records it; a change made by no dashboard account (the command line,
	// an identity provider's first sign-in) is left out.
	AccountVouchers(ctx context.Context, id int64, since time.Time) ([]AccountChange, error)
}

// fourEyesPeople returns the store that knows who holds which account, or why approvals
// cannot work without it.
func (d *Desk) fourEyesPeople() (People, error) {
	if d.People == nil {
		return nil, ops.Errorf(ops.EUNAVAILABLE, "Approvals cannot tell people apart on this server: it has no store of the dashboard's users.")
	}
	return d.People, nil
}

// checkProposer says why the account actorID may not propose a close that needs approval
// (ops rule 13), or nil: only a signed-in person, and with single sign-on configured, only
// a person of its identity provider, since a password account may be a second account of
// anyone.
func (d *Desk) checkProposer(ctx context.Context, actorID int64, why string) error {
	if actorID == 0 {
		return &ops.Error{Code: ops.EFORBIDDEN, Reason: "unknown_person", Message: fmt.Sprintf(
			"This close needs a second person's approval (%s), and only a person signed in to the dashboard may propose it.", why)}
	}
	if d.SSOIssuer == "" {
		return nil
	}
	people, err := d.fourEyesPeople()
	if err != nil {
		return err
	}
	p, err := people.Person(ctx, actorID)
	if err != nil {
		return err
	}
	if !p.signsInThrough(d.SSOIssuer) {
		return &ops.Error{Code: ops.EFORBIDDEN, Reason: "sso_required", Message: fmt.Sprintf(
			"This close needs a second person's approval (%s). With single sign-on on, only a person signed in through it may propose such a close; password accounts are kept for break-glass.", why)}
	}
	return nil
}

// checkApprover says why the account approverID may not approve pr (ops rule 13), beyond
// ops.CheckApprove, or nil. The proposer and the approver must be two people as far as
// Settle can tell: two accounts that are not one identity of the identity provider; with
// single sign-on configured, both of its people, since a password account may be a second
// account of anyone; and neither created or re-enabled the other's account within a
// proposal's lifetime before the proposal or since, since whoever makes an account may know
// its password.
func (d *Desk) checkApprover(ctx context.Context, pr *ops.Proposal, approverID int64) error {
	people, err := d.fourEyesPeople()
	if err != nil {
		return err
	}
	proposer, err := people.Person(ctx, pr.ProposedByID)
	if ops.ErrorCode(err) == ops.ENOTFOUND {
		return &ops.Error{Code: ops.EFORBIDDEN, Reason: "unknown_person", Message: "Four-eyes cannot tell who proposed this close, so it cannot be approved; propose it again while signed in."}
	} else if err != nil {
		return err
	}
	approver, err := people.Person(ctx, approverID)
	if err != nil {
		return err
	}
	if samePerson(proposer, approver) {
		return &ops.Error{Code: ops.EFORBIDDEN, Reason: "self_approval", Message: "You proposed this close: a second person must approve it."}
	}
	if d.SSOIssuer != "" {
		if !approver.signsInThrough(d.SSOIssuer) {
			return &ops.Error{Code: ops.EFORBIDDEN, Reason: "sso_required", Message: "With single sign-on on, only a person signed in through it may approve a close; password accounts are kept for break-glass."}
		}
		if !proposer.signsInThrough(d.SSOIssuer) {
			return &ops.Error{Code: ops.EFORBIDDEN, Reason: "sso_required", Message: fmt.Sprintf(
				"%s proposed this close with a password account; with single sign-on on, a person signed in through it must propose it again.", pr.ProposedBy)}
		}
	}
	// The vouching counts both ways: whoever made the other's account may know its password,
	// so a proposer's fresh second account approving is as much one person as an
	// approver's fresh second account proposing.
	since := pr.ProposedAt.Add(-pr.ExpiresAt.Sub(pr.ProposedAt))
	c, err := vouchedFor(ctx, people, approver.ID, proposer.ID, since)
	if err != nil {
		return err
	}
	if c != nil {
		return &ops.Error{Code: ops.EFORBIDDEN, Reason: "vouched_account", Message: fmt.Sprintf(
			"You %s %s's account at %s, within a proposal's lifetime: a person who did not vouch for that account must approve it.",
			c.did(), pr.ProposedBy, c.At.UTC().Format(time.RFC3339))}
	}
	if c, err = vouchedFor(ctx, people, proposer.ID, approver.ID, since); err != nil {
		return err
	}
	if c != nil {
		return &ops.Error{Code: ops.EFORBIDDEN, Reason: "vouched_account", Message: fmt.Sprintf(
			"%s %s your account at %s, within a proposal's lifetime: a person whose account %s did not vouch for must approve it.",
			pr.ProposedBy, c.did(), c.At.UTC().Format(time.RFC3339), pr.ProposedBy)}
	}
	return nil
}

// vouchedFor returns the newest change at or after since by which the account voucher
// created or re-enabled the account account, or nil when it made none.
func vouchedFor(ctx context.Context, people People, voucher, account int64, since time.Time) (*AccountChange, error) {
	changes, err := people.AccountVouchers(ctx, account, since)
	if err != nil {
		return nil, fmt.Errorf("who vouched for account %d: %w", account, err)
	}
	var found *AccountChange
	for i, c := range changes {
		if c.By == voucher && (found == nil || c.At.After(found.At)) {
			found = &changes[i]
		}
	}
	return found, nil
}

// did names the change in words.
func (c AccountChange) did() string {
	if c.Action == "user.enable" {
		return "re-enabled"
	}
	return "created"
}
