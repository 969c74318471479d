package pg

// OpenStatusesSQL and OpenStatusArraySQL are the open statuses as the statements spell them.
var (
	OpenStatusesSQL    = openStatuses
	OpenStatusArraySQL = openStatusArray
	// UnheldStatusesSQL and UnheldStatusArraySQL are the open statuses no lease holds.
	UnheldStatusesSQL    = unheldStatuses
	UnheldStatusArraySQL = unheldStatusArray
)

// ExpireDueSQL is the statement of ExpireDue, for its plan.
const ExpireDueSQL = expireDueSQL
