package reconstore

// ExceptionChargesSQL is the statement of ExceptionCharges.
const ExceptionChargesSQL = exceptionChargesSQL
