package views

// ProposalView is a close proposed by one person and awaiting a second (ops rule 13), or
// how the latest one ended.
type ProposalView struct {
	// State is open, approved, rejected, superseded or expired.
	State string
	// Awaiting is an open proposal before its end: it may be approved or rejected now.
	Awaiting bool
	// What says what was proposed: "close as not executed (failed)", "close by hand as
	// succeeded".
	What        string
	Outcome     string
	ProviderRef string
	Note        string
	Why         string
	ProposedBy  string
	ProposedAt  string
	ExpiresAt   string
	ExpiresISO  string
	DecidedBy   string
	DecidedAt   string
	// Decision is the reject note, or what closed the operation instead.
	Decision string
	// CanDecide: the viewer may approve or reject; Own: the viewer proposed it, so they
	// may only withdraw (reject) it.
	CanDecide bool
	Own       bool
	Version   string
	// ID is the proposal's id, which the approve and reject forms carry so that a decision
	// applies only to the proposal the person saw.
	ID  string
	URL string
}
