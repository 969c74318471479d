// Package views holds the dashboard's templ components. Each takes a view model built by
// package web and returns HTML; none of them touches the database.
package views

// Viewer is the signed-in person shown in the navigation. The zero value means nobody is
// signed in, and the navigation shows no account controls.
type Viewer struct {
	Email string
	Role  string
}

// SignedIn reports whether the viewer is a signed-in person.
func (v Viewer) SignedIn() bool { return v.Email != "" }

// LoginPage is the sign-in form.
type LoginPage struct {
	Email string
	// Error is a user-safe message from the last attempt; empty on first view.
	Error string
	// Next is the local path to go to after signing in.
	Next string
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
}

// QueueTab is one queue: a status with its live count.
type QueueTab struct {
	Status string
	Label  string
	// Count is already formatted; a capped count reads "10000+".
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
}

// Option is one choice of a select box.
type Option struct {
	Value    string
	Label    string
	Selected bool
}

// QueueRow is one operation as the queue table shows it, already formatted.
type QueueRow struct {
	ID       string
	URL      string
	Tenant   string
	Kind     string
	Provider string
	Order    string
	Amount   string
	Status   string
	Phase    string
	Attempts int
	Age      string
	// Stalled is an in-progress operation whose lease ran out with no result.
	Stalled bool
}
