package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// statements is what Postgres ran over a phase, as pg_stat_statements counts it: every
// statement of Settle's (its background work included), none of the benchmark's own reads of
// the statistics.
type statements struct {
	calls    int64
	exec     time.Duration // the executor's time, without parse, bind, commit or the wire
	plan     time.Duration // the planner's time (pg_stat_statements.track_planning)
	walBytes float64
	each     []statement // the statements by their executor time, costliest first
	records  walRecords  // the WAL's records by kind over the phase (pg_walinspect)
}

// statement is one normalised statement's share of a phase.
type statement struct {
	query    string
	calls    int64
	exec     time.Duration
	walBytes float64
}

// add returns s with t's counts added (another turn of the same target and rate); s may be
// nil.
func (s *statements) add(t *statements) *statements {
	if s == nil || t == nil {
		return cmpOr(s, t)
	}
	s.calls += t.calls
	s.exec += t.exec
	s.plan += t.plan
	s.walBytes += t.walBytes
	s.records = s.records.add(t.records)
	for _, e := range t.each {
		if i := slices.IndexFunc(s.each, func(x statement) bool { return x.query == e.query }); i >= 0 {
			s.each[i].calls += e.calls
			s.each[i].exec += e.exec
			s.each[i].walBytes += e.walBytes
			continue
		}
		s.each = append(s.each, e)
	}
	slices.SortFunc(s.each, func(a, b statement) int { return int(b.exec - a.exec) })
	return s
}

func cmpOr(a, b *statements) *statements {
	if a != nil {
		return a
	}
	return b
}

// resetStatements empties the counts, at a phase's start.
func resetStatements(ctx context.Context, w *world) {
	_, _ = w.db.Pool.Exec(ctx, "SELECT pg_stat_statements_reset()")
	_ = w.db.Pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&w.walStart)
}

// readStatements reads the counts since the last reset.
func readStatements(ctx context.Context, w *world) *statements {
	rows, err := w.db.Pool.Query(ctx, `SELECT regexp_replace(query, '\s+', ' ', 'g'), calls, total_exec_time, total_plan_time, wal_bytes::float8
		FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%' ORDER BY total_exec_time DESC`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	s := &statements{}
	for rows.Next() {
		var e statement
		var ms, planMS float64
		if err := rows.Scan(&e.query, &e.calls, &ms, &planMS, &e.walBytes); err != nil {
			return nil
		}
		e.exec = time.Duration(ms * float64(time.Millisecond))
		s.calls, s.exec, s.walBytes = s.calls+e.calls, s.exec+e.exec, s.walBytes+e.walBytes
		s.plan += time.Duration(planMS * float64(time.Millisecond))
		s.each = append(s.each, e)
	}
	if rows.Err() != nil {
		return nil
	}
	s.records = readWALRecords(ctx, w)
	return s
}

// printStatements prints, for each of Settle's phases counted, its statements per request and
// the costliest of them.
func printStatements(out io.Writer, phases []*phase) {
	header := false
	for _, p := range phases {
		if p.target.name != "settle" || p.stmts == nil || p.sent == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(out, "\nstatements (pg_stat_statements; executor time, without parse, bind, commit or the wire; Settle's background work included):")
			header = true
		}
		n := float64(p.sent)
		s := p.stmts
		fmt.Fprintf(out, "  %.0f/s %s: %.2f statements, %.3f ms executing, %.3f ms planning, %.1f kB of WAL per request\n", p.rate, p.api.name,
			float64(s.calls)/n, float64(s.exec)/n/float64(time.Millisecond), float64(s.plan)/n/float64(time.Millisecond), s.walBytes/n/1024)
		s.records.print(out, n)
		for _, e := range s.each[:min(len(s.each), 5)] {
			fmt.Fprintf(out, "    %5.2f per request, %6.0f µs and %6.0f B of WAL each: %s\n", float64(e.calls)/n,
				float64(e.exec)/float64(max(e.calls, 1))/float64(time.Microsecond), e.walBytes/float64(max(e.calls, 1)), shorten(e.query, 90))
		}
	}
}

// shorten cuts s to n bytes at most, on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + " …"
}
