package views

import "context"

// FollowUpsPage is a person's follow-ups: settled ones with the outcome and the sentence to
// send now, then those still waiting.
type FollowUpsPage struct {
	Viewer Viewer
	Flash  Flash
	Items  []FollowUpItem
}

// FollowUpItem is one follow-up as its person sees it.
type FollowUpItem struct {
	ID, OpID            string
	What, Order, Amount string
	// DetailURL is set for viewers who may act on the operation.
	DetailURL string
	Followed  string
	Settled   bool
	SettledAt string
	// Outcome is succeeded or failed once settled.
	Outcome string
	Unread  bool
	// Customer is the status in plain words and the sentence to send now.
	Customer CustomerLine
}

type unreadFollowUpsKey struct{}

// WithUnreadFollowUps gives the page frame the signed-in person's count of settled, unread
// follow-ups, for the badge in the navigation.
func WithUnreadFollowUps(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, unreadFollowUpsKey{}, n)
}

// UnreadFollowUps is the count WithUnreadFollowUps put in ctx, 0 when none.
func UnreadFollowUps(ctx context.Context) int {
	n, _ := ctx.Value(unreadFollowUpsKey{}).(int)
	return n
}
