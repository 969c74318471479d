package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// walRecords counts the WAL's records over a phase by pg_walinspect's resource manager and
// record type ("Btree/INSERT_LEAF"): the index entries, row versions and full-page images a
// request costs, which executor time alone hides.
type walRecords map[string]walRecord

// walRecord is one record type's count and bytes, full-page images apart.
type walRecord struct {
	count, bytes, fpiBytes int64
}

// add returns r with o's counts added; r may be nil.
func (r walRecords) add(o walRecords) walRecords {
	if r == nil {
		r = walRecords{}
	}
	for k, v := range o {
		c := r[k]
		r[k] = walRecord{c.count + v.count, c.bytes + v.bytes, c.fpiBytes + v.fpiBytes}
	}
	return r
}

// readWALRecords reads the records written since the phase's start.
func readWALRecords(ctx context.Context, w *world) walRecords {
	if w.walStart == "" {
		return nil
	}
	rows, err := w.db.Pool.Query(ctx, `SELECT "resource_manager/record_type", count, record_size, fpi_size
		FROM pg_get_wal_stats($1::pg_lsn, pg_current_wal_insert_lsn(), true) WHERE count > 0`, w.walStart)
	if err != nil {
		return nil
	}
	defer rows.Close()
	r := walRecords{}
	for rows.Next() {
		var kind string
		var rec walRecord
		if rows.Scan(&kind, &rec.count, &rec.bytes, &rec.fpiBytes) != nil {
			return nil
		}
		r[kind] = rec
	}
	return r
}

// sum is the records whose kind starts with any of prefixes.
func (r walRecords) sum(prefixes ...string) walRecord {
	var s walRecord
	for k, v := range r {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				s.count, s.bytes, s.fpiBytes = s.count+v.count, s.bytes+v.bytes, s.fpiBytes+v.fpiBytes
				break
			}
		}
	}
	return s
}

// print writes the records per request: index entries, row versions, commits, full-page
// images, then the five most frequent kinds.
func (r walRecords) print(out io.Writer, n float64) {
	if len(r) == 0 {
		return
	}
	all := r.sum("")
	fmt.Fprintf(out, "    WAL records per request: %.1f index entries, %.1f page splits, %.1f row inserts, %.1f updates, %.1f heap-only updates, %.2f commits; %.0f B of full-page images of %.0f B\n",
		float64(r.sum("Btree/INSERT_").count)/n, float64(r.sum("Btree/SPLIT_").count)/n,
		float64(r.sum("Heap/INSERT").count)/n, float64(r.sum("Heap/UPDATE").count)/n, float64(r.sum("Heap/HOT_UPDATE").count)/n,
		float64(r.sum("Transaction/COMMIT").count)/n, float64(all.fpiBytes)/n, float64(all.bytes+all.fpiBytes)/n)
	kinds := slices.SortedFunc(maps.Keys(r), func(a, b string) int { return int(r[b].count - r[a].count) })
	var top []string
	for _, k := range kinds[:min(len(kinds), 8)] {
		top = append(top, fmt.Sprintf("%s %.2f", k, float64(r[k].count)/n))
	}
	fmt.Fprintf(out, "    most frequent: %s\n", strings.Join(top, ", "))
}
