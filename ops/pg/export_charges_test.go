package pg

// RecordChargeSQL, OperationIDArg, RecordOwnerSQL, ResponseOperationSQL and ResponseItemsSQL
// let the external tests read the plans of charge matching, of the record owner check, of the
// search for a response's call and of the search for the responses of output items.
var (
	RecordChargeSQL      = recordChargeSQL
	OperationIDArg       = operationIDArg
	RecordOwnerSQL       = recordOwnerSQL
	ResponseOperationSQL = responseOperationSQL
	ResponseItemsSQL     = responseItemsSQL
)
