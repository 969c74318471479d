package pg

// RecordChargeSQL and OperationIDArg let the external tests read the charge-matching plan.
var (
	RecordChargeSQL = recordChargeSQL
	OperationIDArg  = operationIDArg
)
