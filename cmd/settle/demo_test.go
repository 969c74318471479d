package main

import (
	"strings"
	"testing"
)

// A --history that is not a number of days is one line and exit 2, before anything starts.
func TestDemoHistoryFlagMistakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		vars map[string]string
	}{
		{[]string{"demo", "--history", "1y", "--dir", t.TempDir()}, nil},
		{[]string{"demo", "--history", "30", "--dir", t.TempDir()}, nil},
		{[]string{"demo", "--history", "-3d", "--dir", t.TempDir()}, nil},
		{[]string{"demo", "--dir", t.TempDir()}, map[string]string{"SETTLE_DEMO_HISTORY": "90d"}},
	} {
		code, stdout, stderr := run(t, tc.args, tc.vars, "")
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--history") {
			t.Errorf("settle %v %v: exit %d, stderr %q; want 2 and one line naming --history", tc.args, tc.vars, code, stderr)
		}
	}
	for v, want := range map[string]int{"0": 0, "0d": 0, "7d": 7, "30d": 30, "35d": 35} {
		if got, err := parseHistoryDays(v); err != nil || got != want {
			t.Errorf("parseHistoryDays(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
}
