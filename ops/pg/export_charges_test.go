package pg

// RecordChargeSQL, OperationIDArg, RecordOwnerSQL and ResponseOperationSQL let the external
// tests read the plans of charge matching, of the record owner check and of the search for a
// response's call.
var (
	RecordChargeSQL      = recordChargeSQL
	OperationIDArg       = operationIDArg
	RecordOwnerSQL       = recordOwnerSQL
	ResponseOperationSQL = responseOperationSQL
)
