// Package views holds the dashboard's templ components. Each takes a view model built by
// package web and returns HTML; none of them touches the database.
package views

import "strconv"

// Viewer is the signed-in person shown in the navigation. The zero value means nobody is
// signed in, and the navigation shows no account controls.
type Viewer struct {
	Email string
	Role  string
}

// SignedIn reports whether the viewer is a signed-in person.
func (v Viewer) SignedIn() bool { return v.Email != "" }

// roleRank mirrors desk.Roles, least to most. It only decides what the pages offer; the
// server checks every action again.
var roleRank = map[string]int{"support": 1, "oncall": 2, "manager": 3, "admin": 4}

// AtLeast reports whether the viewer's role includes everything role may do.
func (v Viewer) AtLeast(role string) bool {
	return roleRank[v.Role] > 0 && roleRank[v.Role] >= roleRank[role]
}

// CanAct reports whether the viewer may look operations up and close them (on-call and up).
func (v Viewer) CanAct() bool { return v.AtLeast("oncall") }

// Flash is a one-time message after an action, shown on the next page.
type Flash struct {
	// Kind is ok, warn or error; it picks the colour.
	Kind    string
	Message string
}

// LoginPage is the sign-in form.
type LoginPage struct {
	Email string
	// Error is a user-safe message from the last attempt; empty on first view.
	Error string
	// Next is the local path to go to after signing in.
	Next string
	// SSOName and SSOURL offer the identity provider's button when single sign-on is on.
	SSOName string
	SSOURL  string
	// PasswordOff leaves the password form out: password sign-in is turned off.
	PasswordOff bool
}

// ErrorPage tells a person what went wrong, in words, without internal detail.
type ErrorPage struct {
	Viewer  Viewer
	Status  int
	Title   string
	Message string
}

// QueuePage is one tab of the operator queues with its filters and one page of rows.
type QueuePage struct {
	Viewer Viewer
	Tabs   []QueueTab
	Filter QueueFilter
	// Options for the filter's select boxes; Value "" means any.
	Tenants []Option
	Kinds   []Option
	Ages    []Option
	Rows    []QueueRow
	// NextURL links to the next page; empty on the last one.
	NextURL string
	Flash   Flash
	Refresh Refresh
	// CanAct shows the selection boxes and the lookup buttons.
	CanAct bool
	// BulkCap is how many ticked operations one lookup handles.
	BulkCap int
	// Running are the bulk lookups under way, whoever started them.
	Running []BulkRunRow
	Saved   SavedViewsBar
}

// Refresh is the auto-refresh control of a live page.
type Refresh struct {
	// Seconds between refreshes; 0 is paused.
	Seconds int
	// Options are the intervals to choose from, with the current one selected.
	Options []Option
	// LiveURL is what the page fetches to refresh itself; PauseURL and ResumeURL switch.
	LiveURL   string
	PauseURL  string
	ResumeURL string
}

// QueueTab is one queue: a status with its live count.
type QueueTab struct {
	Status string
	Label  string
	// Count is already formatted; a capped count reads "1000+".
	Count  string
	URL    string
	Active bool
}

// QueueFilter echoes the submitted filter back into the form.
type QueueFilter struct {
	Tab      string
	Tenant   string
	Kind     string
	Provider string
	Age      string
	Search   string
	// Awaiting keeps the operations whose close awaits approval.
	Awaiting bool
}

// QueueRow is one operation as the queue table shows it, already formatted.
type QueueRow struct {
	ID       string
	URL      string
	Tenant   string
	Kind     string
	Provider string
	Order    string
	// API and Model say which API of an LLM provider the operation called and with which
	// model; empty for other kinds.
	API, Model string
	// Amount is a refund's amount, or the cost an LLM operation recorded.
	Amount   string
	Status   string
	Phase    string
	Attempts int
	Age      string
	// Stalled is an in-progress operation whose lease ran out with no result.
	Stalled bool
	// Awaiting describes a close proposal awaiting approval; empty for none.
	Awaiting string
}

// Page is the frame of every page.
type Page struct {
	Title  string
	Viewer Viewer
	// RefreshSeconds, when set, reloads the page without JavaScript (htmx refreshes only a
	// part of it when scripts run).
	RefreshSeconds int
}

// OpDetailPage is one operation with its timeline, evidence and actions.
type OpDetailPage struct {
	Viewer   Viewer
	Flash    Flash
	Op       OpSummary
	Customer CustomerLine
	Timeline []TimelineItem
	Evidence []EvidenceItem
	Actions  OpActions
	// LastLookup is what the latest lookup by this person found, shown once.
	LastLookup *LookupResult
	// Jobs are the pipeline jobs that use an llm_job operation; nil for other kinds.
	Jobs *OpJobs
	// Proposal is the operation's latest close proposal (ops rule 13); nil for none.
	Proposal *ProposalView
}

// OpSummary is the operation's fields, already formatted.
type OpSummary struct {
	ID, URL, Tenant, Kind, Provider, Status, Phase string
	Order, Customer, Chat, Payment, Amount         string
	Attempts                                       string
	Created, Updated                               string
	Closed, ClosedBy, ProviderRef                  string
	// API, Model and Cost are an LLM operation's API, model and recorded cost; empty for
	// other kinds.
	API, Model, Cost string
	// ProviderKey is empty when the viewer may not see it.
	ProviderKey string
	// Retention is how long the provider keeps keys ("24h"; "none").
	Retention string
	// LLM marks an operation at an LLM provider, which takes no idempotency key: its
	// RetryUntil is the end of Settle's replay of the client's key, never a safe resend.
	LLM bool
	// KeyProtects says in words what the operation's keys protect at its provider.
	KeyProtects string
	// RecordLabel names the provider's record a person gives to close it as succeeded, as
	// its kind and API call it ("Provider record id", "Message id"); RecordHint is what its
	// id looks like (re_..., msg_...); RecordNeed says when it is needed and what Settle
	// does with it.
	RecordLabel, RecordHint, RecordNeed string
	// RetryUntil is when a resend with the key stops being safe (Stripe), or when Settle
	// stops replaying the client's key (LLM); empty before any send.
	RetryUntil    string
	RetryUntilISO string
	// Sent says, where there is no RetryUntil, what was sent to the provider and what it
	// answered: nothing yet, or the last attempt and what it may have done.
	Sent string
	// NowISO is the server's time when the page was made, for the countdown.
	NowISO          string
	RetentionLeft   string
	RetentionPassed bool
	LeaseUntil      string
	Leased          bool
	Stalled         bool
	Final           bool
}

// CustomerLine is what a customer may be told, in plain words.
type CustomerLine struct {
	Headline string
	Sentence string
	// Known is false while the outcome is not known.
	Known bool
	// FollowURL, when set, offers "Tell me when this settles" (an open operation); the
	// answer comes back to FollowBack.
	FollowURL, FollowBack string
}

// TimelineItem is one thing that happened to an operation.
type TimelineItem struct {
	At    string
	AtISO string
	// Kind is request, attempt, lookup, webhook, close or change; it picks the icon colour.
	Kind   string
	Title  string
	Detail string
	Actor  string
	// Attempt fields, empty for other kinds.
	Outcome, HTTPStatus, ProviderRequestID, Duration, ErrorCode string
}

// EvidenceItem is one piece of evidence recorded for the operation.
type EvidenceItem struct {
	Kind, ProviderRef, Summary, RecordedBy, RecordedAt, Data string
}

// OpActions says what the viewer may do to the operation now, and why not otherwise.
type OpActions struct {
	CanLookup bool
	// LookupNote explains a missing lookup (a provider, or an API, that keeps nothing Settle
	// can read), and who settles it instead.
	LookupNote string
	CanClose   bool
	// CanCloseFailed says a person may close it as failed by hand; FailedWhy says why not
	// (the provider may have run it).
	CanCloseFailed      bool
	FailedWhy           string
	CanCloseNotExecuted bool
	// NotExecutedWhy says why "close as not executed" is not offered.
	NotExecutedWhy string
	// Blocked says why nothing can be done now (a live lease), or that it is closed.
	Blocked string
	Version string
	// ApprovalNote says that a close made here needs a second person's approval, and why;
	// ApprovalNotExecuted says so of a close as not executed.
	ApprovalNote, ApprovalNotExecuted string
	// Awaiting hides the close forms while a proposal awaits approval.
	Awaiting bool
}

// LookupResult is one operation's lookup outcome.
type LookupResult struct {
	ID, URL, Order string
	Outcome        string
	Message        string
	NeedsPerson    bool
}

// BulkPage reports a lookup on many operations.
type BulkPage struct {
	Viewer        Viewer
	Closed        int
	AlreadyClosed int
	NeedPerson    int
	Reasons       []BulkReason
	Results       []LookupResult
	BackURL       string
}

// BulkReason is why some operations still need a person, with how many.
type BulkReason struct {
	Outcome string
	Label   string
	Count   int
}

// SupportPage is the support search with its answers.
type SupportPage struct {
	Viewer   Viewer
	Flash    Flash
	Query    string
	Searched bool
	// Notice tells the person about their search (too long, odd characters) in words.
	Notice  string
	Results []SupportResult
}

// SupportResult is one operation as support may talk about it: no keys, no error codes.
type SupportResult struct {
	ID        string
	Order     string
	What      string
	Amount    string
	Requested string
	Customer  CustomerLine
	// DetailURL is set for viewers who may act on the operation.
	DetailURL string
}

// AuditPage is the audit log with its filter.
type AuditPage struct {
	Viewer  Viewer
	Filter  AuditFilter
	Actions []Option
	People  []string
	Entries []AuditLogRow
	NextURL string
}

// AuditFilter echoes the audit filter form.
type AuditFilter struct {
	Actor, Action, Operation, From, To string
}

// AuditLogRow is one audit entry, formatted.
type AuditLogRow struct {
	At, Actor, Action, Entity, EntityID, EntityURL, Before, After, Reason string
}

// UsersPage is the admin's list of users.
type UsersPage struct {
	Viewer Viewer
	Flash  Flash
	Users  []UserRow
	Roles  []string
	// Form echoes the new-user form after a refusal.
	FormEmail, FormRole string
}

// UserRow is one user with what the admin may change.
type UserRow struct {
	ID, Email, Role, Created string
	Disabled                 bool
	// StoppedFollows, on a disabled user, says how many open operations they follow: those
	// follows send them nothing until they are enabled again.
	StoppedFollows int
	// Self is the signed-in admin: they cannot lock themselves out.
	Self bool
}

func itoa(i int) string { return strconv.Itoa(i) }

// TokensPage is the admin's list of API tokens, with the form to issue one.
type TokensPage struct {
	Viewer  Viewer
	Flash   Flash
	Tokens  []TokenRow
	Tenants []string
	// Form echoes the new-token form after a refusal.
	FormTenant, FormName string
	// Issued is a token just issued, shown on this page only: it is not stored.
	Issued *IssuedToken
}

// TokenRow is one API token as listed: never the token itself.
type TokenRow struct {
	ID, Tenant, Name, Prefix, Created, Revoked string
	// LastUsed is when it last authenticated a call, to the minute; "never" if it did not.
	LastUsed string
}

// IssuedToken is a new token with its tenant, shown once.
type IssuedToken struct {
	Tenant, Name, Token string
}

// BulkRunPage is one bulk lookup over a whole filter, running or finished.
type BulkRunPage struct {
	Viewer Viewer
	Flash  Flash
	Run    BulkRunRow
	// Reasons say why operations were left for a person, with how many.
	Reasons []BulkReason
	// Samples are some of the operations left for a person.
	Samples []LookupResult
	// CanStop offers the stop button: the run is running and the viewer may act.
	CanStop bool
	// LiveURL is what the page fetches every two seconds while the run is running.
	LiveURL string
}

// BulkRunRow is a bulk lookup in a line: who runs what, and how far it got.
type BulkRunRow struct {
	ID, URL, Actor, Filter, State string
	StartedAt, FinishedAt         string
	StoppedBy                     string
	Total, Done                   int
	Closed, AlreadyClosed         int
	NeedPerson                    int
	// Percent is Done of Total, 0 to 100.
	Percent int
	// Progress says how far a running lookup got, at what pace, and how long it may take yet.
	Progress string
}

// SavedViewsBar is a page's saved views and the form that saves its current filter; an
// empty Page shows nothing.
type SavedViewsBar struct {
	Page string
	// Query is the page's current filter, which "Save this view" keeps.
	Query string
	Views []SavedViewLink
	// Hidden counts the views the person could see that the bar leaves out.
	Hidden int
	// Roles are whom a view can be shared with on this page, the least selected.
	Roles []Option
}

// SavedViewLink is one saved view as a link; a view whose filter is too long to open has no
// URL, and is offered for deletion only.
type SavedViewLink struct {
	Name, URL, Role, CreatedBy string
	// Count is how many operations the view matches now, on the queues only.
	Count string
	// Active marks the view whose filter is the page's.
	Active bool
	// DeleteURL is set for its author and admins.
	DeleteURL string
}
