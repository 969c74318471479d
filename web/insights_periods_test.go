package web_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// TestInsightsComparesTwoPeriodsOfTheLengthItNames: ops rule 8 makes the rates counted
// facts and ops rule 12 lets no answer say more than Settle knows. A range starts at the
// start of an hour or a UTC day, as /reconcile's does, so it is longer than its span; the
// headline's comparison sets the range, up to its last whole quarter hour (24 hours) or
// hour, against the period of the same length just before it, and names both. At 09:40
// the 7 days' range starts on Feb 23 00:00, the compared hours end at 09:00, and the
// previous period is the 7 days 9 hours before Feb 23: a request just inside each edge
// counts, one just outside does not, and the request after 09:00 counts in the range's
// total but not in the comparison.
func TestInsightsComparesTwoPeriodsOfTheLengthItNames(t *testing.T) {
	t.Parallel()
	now := t0.Add(40 * time.Minute)
	tw := testworld.New(t)
	s := tw.Server(ops.NewManualClock(now))
	s.Accounts = accounts(tw.DB)
	s.Recon, s.Exceptions, s.Operations, s.Insights, s.Firings = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB, rollupstore.New(tw.DB), alertstore.New(tw.DB)
	e := start(t, tw, s.Handler())
	cases := []struct {
		rng       string
		from, end time.Time // the range's start and the end of its compared hours
		// length is the previous period's, compared the page's sentence naming both.
		length, compared string
	}{
		{"24h", time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC), "24 hours 30 minutes",
			"2026-03-01 09:00 – 2026-03-02 09:30 UTC, the range up to its last whole quarter hour, against the previous 24 hours 30 minutes, 2026-02-28 08:30 – 2026-03-01 09:00 UTC."},
		{"7d", time.Date(2026, 2, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), "7 days 9 hours",
			"2026-02-23 00:00 – 2026-03-02 09:00 UTC, the range up to its last whole hour, against the previous 7 days 9 hours, 2026-02-15 15:00 – 2026-02-23 00:00 UTC."},
		{"30d", time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), "30 days 9 hours",
			"2026-01-31 00:00 – 2026-03-02 09:00 UTC, the range up to its last whole hour, against the previous 30 days 9 hours, 2025-12-31 15:00 – 2026-01-31 00:00 UTC."},
	}
	for _, tc := range cases {
		var tenant int64
		if err := e.db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ($1) RETURNING id`, "t"+tc.rng).Scan(&tenant); err != nil {
			t.Fatal(err)
		}
		prevFrom := tc.from.Add(-tc.end.Sub(tc.from))
		// The previous period: one new request on its first minute and one replay on its
		// last (50 %), and a replay the minute before it, outside it.
		// This period: a new request in the last compared minute (0 %), and a replay after
		// the compared hours.
		for i, r := range []struct {
			at       time.Time
			replayed bool
		}{{prevFrom, false}, {tc.from.Add(-time.Minute), true}, {prevFrom.Add(-time.Minute), true},
			{tc.end.Add(-time.Minute), false}, {tc.end.Add(5 * time.Minute), true}} {
			answer := "new"
			if r.replayed {
				answer = "replayed"
			}
			e.exec(t, `INSERT INTO client_requests (tenant_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, 'refund', $2, $3, $4, $5)`, tenant, tc.rng+strconv.Itoa(i), r.replayed, answer, r.at)
		}
	}
	if _, err := (&recon.Rollups{Store: rollupstore.New(e.db), Clock: ops.NewManualClock(now)}).CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	replay := regexp.MustCompile(`data-testid="chart-replay-rate"[\s\S]*?data-testid="chart-compare">([^<]*)<`)
	summary := regexp.MustCompile(`data-testid="chart-replay-rate"[\s\S]*?\((\d+) of (\d+) admitted requests\)`)
	compared := regexp.MustCompile(`data-testid="insights-compared">([^<]*)<`)
	for _, tc := range cases {
		r, body := e.get(t, c, "/insights?range="+tc.rng+"&tenant=t"+tc.rng)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("GET /insights?range=%s = %d\n%s", tc.rng, r.StatusCode, body)
		}
		// The range's total still holds every request since its start, as /reconcile's does.
		if m := summary.FindStringSubmatch(body); m == nil || m[1] != "1" || m[2] != "2" {
			t.Errorf("%s: the replay rate's total counts %v, want 1 of 2 admitted requests", tc.rng, m)
		}
		want := "0 %, ↓ 50 pts vs the previous " + tc.length + " (50 %)."
		if m := replay.FindStringSubmatch(body); m == nil || m[1] != want {
			t.Errorf("%s: the replay rate is compared as %v, want %q", tc.rng, m, want)
		}
		if m := compared.FindStringSubmatch(body); m == nil || html.UnescapeString(m[1]) != "Each headline's comparison counts "+tc.compared {
			t.Errorf("%s: the page names the compared periods as %v, want %q", tc.rng, m, tc.compared)
		}
	}
}
