package pg

import (
	"strings"

	"github.com/settle-dev/settle/ops"
)

// The open statuses as SQL text, built once from ops.OpenStatuses so that no statement
// spells the list by hand and none can drift from the domain's. The schema spells it too,
// in the predicates of the partial indexes over open operations (operations_open_intent_idx
// keeps ops rule 2); TestOpenStatusesMatchTheSchema fails when the two differ.
var (
	// openStatuses is the list for "status IN": ('received', 'in_progress', ...).
	openStatuses = "(" + quoteStatuses(ops.OpenStatuses) + ")"
	// openStatusArray is the list as an array, for unnest.
	openStatusArray = "ARRAY[" + quoteStatuses(ops.OpenStatuses) + "]"
	// unheldStatuses are the open statuses but in_progress, the rows no lease holds, which
	// operations_queue_idx keeps (migration 00073): an in-progress row is read through
	// operations_stalled_idx, by its lease, so a statement over open rows reads the two apart.
	unheldStatuses = "(" + quoteStatuses(unheld()) + ")"
	// unheldStatusArray is unheldStatuses as an array, for unnest.
	unheldStatusArray = "ARRAY[" + quoteStatuses(unheld()) + "]"
)

// unheld returns ops.OpenStatuses without ops.StatusInProgress.
func unheld() []ops.Status {
	var out []ops.Status
	for _, s := range ops.OpenStatuses {
		if s != ops.StatusInProgress {
			out = append(out, s)
		}
	}
	return out
}

// quoteStatuses writes statuses as SQL string literals separated by commas.
func quoteStatuses(statuses []ops.Status) string {
	quoted := make([]string, len(statuses))
	for i, s := range statuses {
		quoted[i] = "'" + strings.ReplaceAll(string(s), "'", "''") + "'"
	}
	return strings.Join(quoted, ", ")
}
