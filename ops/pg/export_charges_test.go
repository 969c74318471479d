package pg

// RecordChargeSQL, OperationIDArg and RecordOwnerSQL let the external tests read the plans
// of charge matching and of the record owner check.
var (
	RecordChargeSQL = recordChargeSQL
	OperationIDArg  = operationIDArg
	RecordOwnerSQL  = recordOwnerSQL
)
