package web

import "time"

// rangeFrom is where a report of range rng (a value of reconRanges) begins at now, for rows
// or points width wide: the range's span before now, back to the start of its default
// bucket's window (an hour for 24h, a day for 7d and 30d), or of a wider row's. Every page
// and every width reads a range from there, so "Last 7 days" counts the same requests per
// hour as per day, and on /insights as on /reconcile (ops rule 8).
func rangeFrom(rng string, now time.Time, width time.Duration) time.Time {
	for _, r := range reconRanges {
		if r.value == rng {
			unit := time.Hour
			if r.bucket == "day" {
				unit = 24 * time.Hour
			}
			return now.Add(-r.d).Truncate(max(unit, width))
		}
	}
	return now.Truncate(width)
}
