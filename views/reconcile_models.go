package views

// ReconcilePage is the per-window table: what came in, what was sent, what the provider
// billed, per window, tenant, kind, provider and API.
type ReconcilePage struct {
	Viewer  Viewer
	Saved   SavedViewsBar
	Filter  ReconcileFilter
	Ranges  []Option
	Buckets []Option
	Tenants []Option
	Kinds   []Option
	APIs    []Option
	// Headers name the measure columns, in the order of each row's Cells.
	Headers []string
	Rows    []ReconcileRow
	Total   ReconcileRow
	CSVURL  string
	// Paging is set when the table is split into pages (hourly rows, a day per page): Rows
	// hold one page, Total still the whole range.
	Paging *ReconPaging
	// Runs says when each provider was last reconciled; the charges columns are only as
	// fresh as that.
	Runs []ReconRun
	// Freshness says up to when the rollups behind the table are counted; Stale marks it
	// as late.
	Freshness string
	Stale     bool
}

// ReconPaging says which page of the table is shown and links to its neighbours; a link
// is empty where there is no such page.
type ReconPaging struct {
	// Label says which windows the page holds, e.g. "Page 1 of 8: 2027-01-01 00:00 to
	// 2027-01-01 23:00".
	Label    string
	NewerURL string
	OlderURL string
}

// ReconcileFilter echoes the submitted filter back into the form.
type ReconcileFilter struct {
	Range    string
	Bucket   string
	Tenant   string
	Kind     string
	Provider string
	// API is the label of the API the table is narrowed to; "" for every API.
	API string
}

// ReconcileRow is one window of one tenant, kind, provider and API (of an LLM operation;
// a dash for others), already formatted.
type ReconcileRow struct {
	Window   string
	Tenant   string
	Kind     string
	Provider string
	API      string
	Cells    []ReconCell
	// Difference is provider charges minus succeeded operations; it should be zero.
	Difference string
	DiffZero   bool
	Saved      string
	Lost       string
}

// ReconCell is one number with the link to the rows behind it.
type ReconCell struct {
	Measure string
	Value   string
	URL     string
	// Alert marks a number that should be zero (double charges, orphans).
	Alert bool
}

// ReconRun is the last run of one provider's reconciler.
type ReconRun struct {
	Provider  string
	LastRun   string
	DoneUntil string
	Summary   string
	Running   bool
}

// ReconDrillPage lists the recorded rows behind one number of the table.
type ReconDrillPage struct {
	Viewer  Viewer
	Title   string
	BackURL string
	Rows    []ReconDrillRow
	// Truncated says the list stops at its limit.
	Truncated bool
	// Gap says how the table's figure differs from the rows listed, when it does: rows the
	// retention removed are still counted, and rows recorded since the rollups' last run are
	// not yet.
	Gap string
}

// ReconDrillRow is one client request, operation, attempt or charge.
type ReconDrillRow struct {
	At          string
	OperationID string
	Tenant      string
	Kind        string
	Provider    string
	Ref         string
	Detail      string
	Amount      string
}

// ExceptionsPage is the exception queue: one status tab with its filters.
type ExceptionsPage struct {
	Viewer     Viewer
	Saved      SavedViewsBar
	Tabs       []ExceptionTab
	Filter     ExceptionsFilter
	Kinds      []Option
	Severities []Option
	Rows       []ExceptionRow
	NextURL    string
}

// ExceptionTab is one status with its count.
type ExceptionTab struct {
	Status string
	Label  string
	Count  string
	URL    string
	Active bool
}

// ExceptionsFilter echoes the queue's filter.
type ExceptionsFilter struct {
	Status   string
	Kind     string
	Severity string
}

// ExceptionRow is one exception as the queue lists it.
type ExceptionRow struct {
	ID        string
	URL       string
	Kind      string
	KindLabel string
	Severity  string
	Status    string
	Provider  string
	Tenant    string
	Summary   string
	Amount    string
	Assignee  string
	FirstSeen string
	LastSeen  string
	SeenCount int
}

// ExceptionPage is one exception: our operation beside the provider's records, the
// workflow's forms and the audit log.
type ExceptionPage struct {
	Viewer    Viewer
	Exception ExceptionRow
	Version   string
	Note      string
	// OperationURL links to our operation, empty for an orphan.
	OperationID string
	// TheirsLabel heads the provider's columns, one per record.
	Theirs  []string
	Compare []ReconCompareRow
	Audit   []ReconAuditRow
	// Which forms to show.
	CanAcknowledge bool
	CanResolve     bool
	CanReopen      bool
	Severities     []Option
	// Error is a user-safe message from the last submitted form.
	Error string
}

// ReconCompareRow is one field of our record and the provider's, with the difference marked.
type ReconCompareRow struct {
	Field   string
	Ours    string
	Theirs  []string
	Differs bool
}

// ReconAuditRow is one change of the exception.
type ReconAuditRow struct {
	At     string
	Actor  string
	Action string
	Reason string
	Change string
}
