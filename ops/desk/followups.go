package desk

import (
	"context"
	"time"

	"github.com/settle-dev/settle/ops"
)

// FollowUp is a person waiting to hear how an open operation ends ("Tell me when this
// settles"). The store settles it, in the transaction that closes the operation, whichever
// path closes it, and writes its notifications to the follow-ups' outbox there too.
type FollowUp struct {
	ID        int64
	UserID    int64
	Op        *ops.Operation
	CreatedAt time.Time
	// SettledAt and Outcome are set once the operation closed.
	SettledAt *time.Time
	Outcome   ops.Status
	ReadAt    *time.Time
}

// Settled reports whether the operation the person follows has closed.
func (f FollowUp) Settled() bool { return f.SettledAt != nil }

// FollowUpStore keeps the follow-ups.
type FollowUpStore interface {
	// AddFollowUp records that userID follows opID, when the operation is open. created is
	// false when the person already follows it; a closed operation is ECONFLICT with its
	// closure, an unknown one ENOTFOUND.
	AddFollowUp(ctx context.Context, userID int64, opID string, now time.Time) (created bool, err error)
	// FollowUpsOf lists a person's follow-ups, unread settled ones first, then waiting
	// ones, then read ones, newest first within each.
	FollowUpsOf(ctx context.Context, userID int64, limit int) ([]FollowUp, error)
	// UnreadFollowUps counts a person's settled follow-ups not marked as read.
	UnreadFollowUps(ctx context.Context, userID int64) (int, error)
	// MarkFollowUpRead marks one settled follow-up of userID as read; ENOTFOUND when it
	// is not theirs or not settled.
	MarkFollowUpRead(ctx context.Context, userID, id int64, at time.Time) error
	// MadeCharges reads the charges of a followed operation that took money, for the
	// sentence its settling shows (ops rule 12).
	ops.MadeCharges
}

// FollowUps is what a person does with follow-ups.
type FollowUps struct {
	Store FollowUpStore
	Clock ops.Clock
}

// Watch makes u follow the operation opID until it settles. It answers in words whether the
// person follows it now or did already; a closed operation is ECONFLICT naming who closed it.
func (f *FollowUps) Watch(ctx context.Context, u *User, opID string) (string, bool, error) {
	created, err := f.Store.AddFollowUp(ctx, u.ID, opID, f.Clock.Now())
	if err != nil {
		return "", false, err
	}
	if !created {
		return "You already follow this operation; the follow-ups page will tell you when it settles.", false, nil
	}
	return "You follow this operation now: the follow-ups page will tell you when it settles, with the sentence to send.", true, nil
}

// List returns u's follow-ups.
func (f *FollowUps) List(ctx context.Context, u *User) ([]FollowUp, error) {
	return f.Store.FollowUpsOf(ctx, u.ID, 200)
}

// MadeCharges implements ops.MadeCharges for the sentences of u's follow-ups.
func (f *FollowUps) MadeCharges(ctx context.Context, opID string) ([]ops.ProviderRecord, error) {
	return f.Store.MadeCharges(ctx, opID)
}

// Unread counts u's settled follow-ups not yet read.
func (f *FollowUps) Unread(ctx context.Context, u *User) (int, error) {
	return f.Store.UnreadFollowUps(ctx, u.ID)
}

// MarkRead marks one of u's settled follow-ups as read.
func (f *FollowUps) MarkRead(ctx context.Context, u *User, id int64) error {
	return f.Store.MarkFollowUpRead(ctx, u.ID, id, f.Clock.Now())
}
