package main

import (
	"strings"
	"testing"
	"time"
)

// SETTLE_LLM_BODY_KEEP defaults to a week, takes a Go duration, and a mistake is one line on
// stderr and exit status 2.
func TestBodyKeepIsConfigured(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		vars map[string]string
		want time.Duration
	}{
		{map[string]string{}, 7 * 24 * time.Hour},
		{map[string]string{"SETTLE_LLM_BODY_KEEP": "48h"}, 48 * time.Hour},
	} {
		c.vars["DATABASE_URL"] = "postgres://u@127.0.0.1:1/x"
		cfg, err := LoadConfig([]string{"serve"}, env(c.vars), t.TempDir())
		if err != nil || cfg.LLM.BodyKeep != c.want {
			t.Errorf("%v: keep %s, %v; want %s", c.vars, cfg.LLM.BodyKeep, err, c.want)
		}
	}
	for v, want := range map[string]string{"a week": `SETTLE_LLM_BODY_KEEP="a week"`, "10m": "SETTLE_LLM_BODY_KEEP=10m0s is shorter than an hour"} {
		code, _, stderr := run(t, []string{"serve"}, map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:1/x", "SETTLE_LLM_BODY_KEEP": v}, "")
		if code != 2 || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("SETTLE_LLM_BODY_KEEP=%s: exit %d, stderr %q", v, code, stderr)
		}
	}
}
