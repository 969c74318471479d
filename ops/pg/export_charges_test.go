package pg

// RecordChargeSQL, OperationIDArg, RecordOwnerSQL, ResponseOperationSQL, ResponseItemsSQL and
// KeptItemsSQL let the external tests read the plans of charge matching, of the record owner
// check, of the search for a response's call, of the search for the responses of output
// items and of the read of those items as kept.
var (
	RecordChargeSQL      = recordChargeSQL
	OperationIDArg       = operationIDArg
	RecordOwnerSQL       = recordOwnerSQL
	ResponseOperationSQL = responseOperationSQL
	ResponseItemsSQL     = responseItemsSQL
	KeptItemsSQL         = keptItemsSQL
)
