package pg

// OpenStatusesSQL and OpenStatusArraySQL are the open statuses as the statements spell them.
var (
	OpenStatusesSQL    = openStatuses
	OpenStatusArraySQL = openStatusArray
)
