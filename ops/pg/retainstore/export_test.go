package retainstore

// RetentionTables lists the table each step of a retention batch deletes from, in the order
// the batch runs them: the steps of the batch's operations, then those of the rows of no
// operation.
func RetentionTables() []string {
	var out []string
	for _, s := range retentionSteps {
		out = append(out, s.table)
	}
	for _, s := range orphanSteps {
		out = append(out, s.table)
	}
	return out
}

// OrphanStepSQL is the DELETE of one batch (or with dry the count) of the orphan step that
// deletes from table; the first such step.
func OrphanStepSQL(table string, dry bool) string {
	for _, s := range orphanSteps {
		if s.table == table {
			return s.sql(dry)
		}
	}
	return ""
}
