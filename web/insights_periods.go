package web

import (
	"fmt"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops/recon"
)

// comparedPeriods are the two periods a headline compares for a range that starts at from
// and reads rows bucket wide: the range up to its last whole unit before now (a quarter
// hour for the 24 hours' points, else an hour), and the period of the same length that ends
// where the range starts. The range starts at the start of an hour or a UTC day, where
// /reconcile's does (rangeFrom), so it is up to a day longer than its span; comparing it
// with "the previous 7 days" would set 7 and a half days against 7, or a range that ends in
// the future against one that has ended (ops rule 12). Both ends of the previous period fall
// on whole units, whose rollups are kept for good, where minute rows are pruned.
func comparedPeriods(from, now time.Time, bucket time.Duration) (cur, prev recon.Window, unit time.Duration) {
	unit = min(bucket, time.Hour)
	end := now.Truncate(unit)
	if !end.After(from) { // a range starts a span before now: never so, but never an empty window
		end = from.Add(unit)
	}
	length := end.Sub(from)
	return recon.Window{From: from, To: end}, recon.Window{From: from.Add(-length), To: from}, unit
}

// spanText says a length in words: "24 hours 30 minutes", "7 days 9 hours".
func spanText(d time.Duration) string {
	day := 24 * time.Hour
	var parts []string
	add := func(n int64, one, many string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, plural(n, one, many)))
		}
	}
	if d >= 2*day {
		add(int64(d/day), "day", "days")
		d %= day
	}
	add(int64(d/time.Hour), "hour", "hours")
	add(int64(d%time.Hour/time.Minute), "minute", "minutes")
	return strings.Join(parts, " ")
}

// windowText names a window's ends in UTC: "2026-02-23 00:00 – 2026-03-02 09:00 UTC".
func windowText(w recon.Window) string {
	const layout = "2006-01-02 15:04"
	return w.From.UTC().Format(layout) + " – " + w.To.UTC().Format(layout) + " UTC"
}

// unitText names the unit the compared periods end on.
func unitText(unit time.Duration) string {
	switch unit {
	case time.Hour:
		return "hour"
	case 15 * time.Minute:
		return "quarter hour"
	}
	return spanText(unit)
}
