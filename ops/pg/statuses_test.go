package pg_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestOpenStatusesMatchTheSchema fails when the open statuses the statements name, the
// domain's list (ops.OpenStatuses) and the predicates of the schema's partial indexes over
// open operations differ. A status the index of ops rule 2 left out would let an intent
// have two open operations; one the queue's indexes left out would make its reads scan: the
// queue index keeps the open rows no lease holds and the stalled index the in-progress ones
// (migration 00073), and together they name every open status once.
func TestOpenStatusesMatchTheSchema(t *testing.T) {
	db := pgtest.New(t)
	want := make([]string, len(ops.OpenStatuses))
	var unheld []string
	for i, s := range ops.OpenStatuses {
		want[i] = string(s)
		if s != ops.StatusInProgress {
			unheld = append(unheld, string(s))
		}
	}
	slices.Sort(want)
	slices.Sort(unheld)
	checkList := func(what, sql string, want []string) {
		t.Helper()
		if got := quotedStatuses(sql); !slices.Equal(got, want) {
			t.Errorf("%s names %v, want %v", what, got, want)
		}
	}
	check := func(what, sql string) { t.Helper(); checkList(what, sql, want) }
	check("openStatuses", pg.OpenStatusesSQL)
	check("openStatusArray", pg.OpenStatusArraySQL)
	checkList("unheldStatuses", pg.UnheldStatusesSQL, unheld)
	checkList("unheldStatusArray", pg.UnheldStatusArraySQL, unheld)
	predicate := func(index string) string {
		t.Helper()
		var def string
		if err := db.Pool.QueryRow(context.Background(), `SELECT pg_get_indexdef(oid) FROM pg_class WHERE relname = $1`,
			index).Scan(&def); err != nil {
			t.Fatalf("index %s: %v", index, err)
		}
		_, predicate, ok := strings.Cut(def, " WHERE ")
		if !ok {
			t.Fatalf("index %s has no predicate: %s", index, def)
		}
		return predicate
	}
	checkList("operations_queue_idx", predicate("operations_queue_idx"), unheld)
	checkList("operations_queue_idx and operations_stalled_idx",
		predicate("operations_queue_idx")+predicate("operations_stalled_idx"), want)
	for _, index := range []string{"operations_open_intent_idx", "operations_payment_open_idx"} {
		check(index, predicate(index))
	}
}

var quotedStatus = regexp.MustCompile(`'([a-z_]+)'`)

// quotedStatuses returns the status names an SQL text quotes, sorted.
func quotedStatuses(sql string) []string {
	var out []string
	for _, m := range quotedStatus.FindAllStringSubmatch(sql, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return out
}
