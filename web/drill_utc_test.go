package web_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/desk"
)

// TestADrillDownNamesItsWindowInUTC: ops rule 12 lets no answer say more than Settle knows,
// and a day of the table is a UTC day, not the reader's. The drill-down's heading names the
// window its rows fall in as the table's note does, in UTC, so a person whose day begins
// at another hour does not read a UTC day as theirs.
func TestADrillDownNamesItsWindowInUTC(t *testing.T) {
	t.Parallel()
	e := newReconEnv(t)
	_, tenant := seedRecon(t, e)
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	for width, want := range map[string]string{"24h0m0s": "2026-03-02 UTC", "1h0m0s": "2026-03-02 08:00 UTC"} {
		at := t0.Add(-time.Hour)
		if width == "24h0m0s" {
			at = at.Truncate(24 * time.Hour)
		}
		q := url.Values{"at": {at.Format(time.RFC3339)}, "width": {width}, "tenant": {itoa(tenant)},
			"kind": {"refund"}, "provider": {"stripe"}, "api": {""}, "measure": {"client_requests"}}
		_, body := e.get(t, c, "/reconcile/drill?"+q.Encode())
		if !strings.Contains(body, "<h1>Client requests · "+want+" · shop") {
			t.Errorf("width %s: the heading should name the window %s\n%s", width, want, body)
		}
	}
}
