package web_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/desk"
)

// TestARangeCountsTheSameRequestsOnEveryPage: ops rule 8 makes the rates counted facts and
// ops rule 12 lets no answer say more than Settle knows, and /insights says its numbers are
// those of the reconciliation table. So "Last 7 days" (or 24 hours) counts the same client
// requests on /insights as on /reconcile, with rows per day or per hour: one window per
// range, whatever the width of its rows or points. Two admitted requests (those the replay
// chart counts) sit at its edges: one on the first hour of the 24 hours' first window, one
// early on the 7 days' first day.
func TestARangeCountsTheSameRequestsOnEveryPage(t *testing.T) {
	t.Parallel()
	e := newInsightsEnv(t)
	var tenant int64
	e.exec(t, `INSERT INTO tenants (name) VALUES ('shop')`)
	if err := e.db.Pool.QueryRow(t.Context(), `SELECT id FROM tenants WHERE name = 'shop'`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	for i, at := range []time.Time{t0.Add(-24 * time.Hour), t0.Add(-7*24*time.Hour - 3*time.Hour)} {
		e.exec(t, `INSERT INTO client_requests (tenant_id, kind, request_ref, duplicate, answer, received_at)
VALUES ($1, 'refund', $2, false, 'new', $3)`, tenant, "edge"+string(rune('0'+i)), at)
	}
	seedReconFor(t, e, tenant)
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	total := regexp.MustCompile(`data-testid="recon-total"[\s\S]*?data-testid="recon-client_requests"[^>]*>\s*([^<\s]+)`)
	insights := regexp.MustCompile(`data-testid="chart-replay-rate"[\s\S]*?\(\d+ of (\d+) admitted requests\)`)
	for _, tc := range []struct {
		rng  string
		want string
	}{{"24h", "4"}, {"7d", "5"}, {"30d", "5"}} {
		_, body := e.get(t, c, "/insights?range="+tc.rng)
		if m := insights.FindStringSubmatch(body); m == nil || m[1] != tc.want {
			t.Errorf("/insights?range=%s counts %v client requests, want %s", tc.rng, m, tc.want)
		}
		for _, bucket := range []string{"hour", "day"} {
			if tc.rng == "30d" && bucket == "hour" {
				continue
			}
			_, body := e.get(t, c, "/reconcile?range="+tc.rng+"&bucket="+bucket)
			if m := total.FindStringSubmatch(body); m == nil || m[1] != tc.want {
				t.Errorf("/reconcile?range=%s&bucket=%s totals %v client requests, want %s", tc.rng, bucket, m, tc.want)
			}
		}
	}
}
