package main

import (
	"strings"
	"testing"
)

// SETTLE_MAX_IN_FLIGHT defaults to 1000, takes a whole number or off (0 and off: no cap),
// and anything else stops serve and demo with one line and exit status 2.
func TestMaxInFlightIsConfigured(t *testing.T) {
	t.Parallel()
	db := "postgres://u@127.0.0.1:1/x"
	for v, want := range map[string]int{"": 1000, "1000": 1000, "250": 250, "0": 0, "off": 0} {
		cfg, err := LoadConfig([]string{"serve"}, env(map[string]string{"DATABASE_URL": db, "SETTLE_MAX_IN_FLIGHT": v}), t.TempDir())
		if err != nil || cfg.Web.MaxInFlight != want {
			t.Errorf("SETTLE_MAX_IN_FLIGHT=%q: %d, %v; want %d", v, cfg.Web.MaxInFlight, err, want)
		}
	}
	for _, v := range []string{"lots", "-1", "1.5", "1e3", "on"} {
		for _, args := range [][]string{{"serve"}, {"demo"}} {
			code, stdout, stderr := run(t, args, map[string]string{"DATABASE_URL": db, "SETTLE_MAX_IN_FLIGHT": v}, "")
			want := `SETTLE_MAX_IN_FLIGHT="` + v + `" is not a whole number of requests`
			if code != 2 || stdout != "" || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("settle %v with SETTLE_MAX_IN_FLIGHT=%s: exit %d, stderr %q; want 2 and one line with %q", args, v, code, stderr, want)
			}
		}
	}
}
