package pg

// RetentionStateName is the retention's row of retention_state: ops/pg/retainstore writes
// how far the retention removed, and the rollups (ops/pg/rollupstore) read it there.
const RetentionStateName = "retention"
