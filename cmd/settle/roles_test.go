package main

import (
	"strings"
	"testing"
	"time"
)

// SETTLE_ROLE_LEASE defaults to 30 s and refuses a lease too short to renew, and one so long
// (a slip of the unit, 999999h) that a replica killed mid-run would hold the reconciler, the
// retention and the alert evaluator for years.
func TestRoleLeaseSetting(t *testing.T) {
	t.Parallel()
	db := "postgres://u@127.0.0.1:1/x"
	for _, c := range []struct {
		value string
		want  time.Duration
	}{{"", 30 * time.Second}, {"3s", 3 * time.Second}, {"2m", 2 * time.Minute}} {
		cfg, err := LoadConfig([]string{"serve"}, env(map[string]string{"DATABASE_URL": db, "SETTLE_ROLE_LEASE": c.value}), t.TempDir())
		if err != nil || cfg.RoleLease != c.want {
			t.Errorf("SETTLE_ROLE_LEASE=%q: %s (%v), want %s", c.value, cfg.RoleLease, err, c.want)
		}
	}
	code, _, stderr := run(t, []string{"serve"}, map[string]string{"DATABASE_URL": db, "SETTLE_ROLE_LEASE": "1s"}, "")
	if code != 2 || !strings.Contains(stderr, "SETTLE_ROLE_LEASE=1s is shorter than 3s") {
		t.Errorf("SETTLE_ROLE_LEASE=1s: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run(t, []string{"reconcile"}, map[string]string{"DATABASE_URL": db, "SETTLE_ROLE_LEASE": "999999h"}, "")
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "SETTLE_ROLE_LEASE=999999h0m0s is longer than 10m0s") {
		t.Errorf("SETTLE_ROLE_LEASE=999999h: exit %d, stderr %q; want 2 and one line saying it is longer than 10m0s", code, stderr)
	}
}
