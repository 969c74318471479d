package purgestore

// PurgeOperationsSQL is the statement that purges the calls' bodies, for its plan.
const PurgeOperationsSQL = purgeOperationsSQL
