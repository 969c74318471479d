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
