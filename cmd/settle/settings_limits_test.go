package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApprovalTTLHasAnUpperLimit: SETTLE_APPROVAL_TTL=2400h (a slip for 24h) let a proposed
// close wait a hundred days for its second person, approved long after its evidence and
// the people of ops rule 13 changed. It is refused in one line; a week is accepted.
func TestApprovalTTLHasAnUpperLimit(t *testing.T) {
	t.Parallel()
	wantServeRefused(t, []refusedEnv{
		{map[string]string{envApprovalTTL.Name: "2400h"}, envApprovalTTL.Name + "=2400h0m0s is longer than a week"},
		{map[string]string{envApprovalTTL.Name: "169h"}, "longer than a week"},
	})
	cfg, err := LoadConfig([]string{"serve"}, env(map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:1/x", envApprovalTTL.Name: "168h"}), t.TempDir())
	if err != nil || cfg.Web.Approvals.TTL != 168*time.Hour {
		t.Errorf("a week: %v, %v; want accepted", cfg.Web.Approvals.TTL, err)
	}
}

// TestShutdownTimeoutHasAnUpperLimit: SETTLE_SHUTDOWN_TIMEOUT=35h (a slip for 35s) held a
// stopping replica, and the rollout or node drain waiting on it, for a day and a half;
// past the longest call Settle runs (SETTLE_LLM_DEADLINE, 10 minutes) a wait finishes
// nothing the reaper would not. A mistake in the configuration is refused in one line with
// exit 2 (docs/configuration.md); 15 minutes is accepted.
func TestShutdownTimeoutHasAnUpperLimit(t *testing.T) {
	t.Parallel()
	wantServeRefused(t, []refusedEnv{
		{map[string]string{envShutdownTimeout.Name: "35h"}, envShutdownTimeout.Name + "=35h0m0s is longer than 15 minutes"},
		{map[string]string{envShutdownTimeout.Name: "16m"}, "longer than 15 minutes"},
	})
	cfg, err := LoadConfig([]string{"serve"}, env(map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:1/x", envShutdownTimeout.Name: "15m"}), t.TempDir())
	if err != nil || cfg.ShutdownTimeout != 15*time.Minute {
		t.Errorf("15m: %v, %v; want accepted", cfg.ShutdownTimeout, err)
	}
}

// TestJobMaxAttemptsFitsTheOperationsAttempts: ops rule 4 allows an operation 6 attempts,
// and a job's generation is one operation, so SETTLE_JOB_MAX_ATTEMPTS=10 promised ten sends
// and the ledger stopped the job at six. It is refused in one line; 6 is accepted.
func TestJobMaxAttemptsFitsTheOperationsAttempts(t *testing.T) {
	t.Parallel()
	wantServeRefused(t, []refusedEnv{
		{map[string]string{envJobMaxAttempts.Name: "10"}, envJobMaxAttempts.Name + `="10" is more than the 6 attempts an operation may make`},
		{map[string]string{envJobMaxAttempts.Name: "7"}, "more than the 6 attempts"},
	})
	c, err := loadJobsEnv(env(map[string]string{envJobMaxAttempts.Name: "6"}))
	if err != nil || c.MaxAttempts != 6 {
		t.Errorf("6: %d, %v; want accepted", c.MaxAttempts, err)
	}
}

// TestDemoRefusesAnAddressBeyondLoopback: the demo's logins are printed in the README, so
// 'settle demo --addr 0.0.0.0:8080' (or SETTLE_ADDR=:8080) handed its dashboard, admin
// included, to anyone on the network. It is refused in one line with exit 2 before the
// demo's folder is made or a cluster started, as 'settle fake stripe --addr' refuses it.
func TestDemoRefusesAnAddressBeyondLoopback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		vars map[string]string
	}{
		{[]string{"--addr", "0.0.0.0:8080"}, nil},
		{[]string{"--addr", "[::]:8080"}, nil},
		{[]string{"--addr", "192.0.2.10:8080"}, nil},
		{nil, map[string]string{envAddr.Name: ":8080"}},
	} {
		dir := filepath.Join(t.TempDir(), "demo-pg")
		args := append(append([]string{"demo", "--dir", dir}, tc.args...), "--history", "0d")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var stdout, stderr bytes.Buffer
		code := Main(ctx, args, envList(tc.vars), strings.NewReader(""), &stdout, &stderr)
		cancel()
		refusedInOneLine(t, args, code, stdout.String(), stderr.String(), "loopback")
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("settle %v made the demo's folder before refusing", args)
		}
	}
}

// TestShutdownWaitsForTheLongestLLMCall is the attack of a rollout during a long LLM call:
// the shutdown waited 35 s by default (the refund deadline plus 10 s) while a gateway call
// may run for SETTLE_LLM_DEADLINE, 10 minutes, so a call already sent, and paid, was cut
// with the process: its answer never reached its client, its operation was left uncertain,
// and the client's retry could pay for a second generation (ops rule 3). With the gateway
// on, the default wait covers the LLM deadline, a configured wait shorter than it is
// taken (an orchestrator's grace period may be what it follows) but warned of at start,
// naming both, and the upper limit makes room for a longer deadline.
func TestShutdownWaitsForTheLongestLLMCall(t *testing.T) {
	t.Parallel()
	db := "postgres://u@127.0.0.1:1/x"
	llm := func(kv ...string) map[string]string {
		m := map[string]string{"DATABASE_URL": db, envLLMBaseURL.Name: "http://127.0.0.1:1/v1"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		vars map[string]string
		want time.Duration
	}{
		{llm(), 10*time.Minute + 10*time.Second},
		{llm(envLLMDeadline.Name, "30s"), 40 * time.Second},
		{llm(envLLMDeadline.Name, "30m", envLLMKeyTTL.Name, "24h"), 30*time.Minute + 10*time.Second},
		{llm(envLLMDeadline.Name, "2m", envShutdownTimeout.Name, "2m"), 2 * time.Minute},
		{map[string]string{"DATABASE_URL": db, envAnthropicBaseURL.Name: "http://127.0.0.1:1"}, 10*time.Minute + 10*time.Second},
	} {
		cfg, err := LoadConfig([]string{"serve"}, env(c.vars), t.TempDir())
		if err != nil || cfg.ShutdownTimeout != c.want || NewProgram(cfg, nil).ShutdownTimeout() != c.want {
			t.Errorf("%v: shutdown timeout %s (%v), want %s", c.vars, cfg.ShutdownTimeout, err, c.want)
		}
	}
	wantServeRefused(t, []refusedEnv{
		{llm(envLLMDeadline.Name, "30m", envShutdownTimeout.Name, "31m"), envShutdownTimeout.Name + "=31m0s is longer than"},
	})
	for _, c := range []struct {
		vars map[string]string
		warn bool
	}{
		{llm(envShutdownTimeout.Name, "35s"), true},
		{llm(), false},
		{map[string]string{"DATABASE_URL": db, envShutdownTimeout.Name: "35s"}, false},
	} {
		cfg, err := LoadConfig([]string{"serve"}, env(c.vars), t.TempDir())
		if err != nil {
			t.Fatalf("%v: %v", c.vars, err)
		}
		var log bytes.Buffer
		NewProgram(cfg, slog.New(slog.NewTextHandler(&log, nil))).warnShortShutdown()
		warned := strings.Contains(log.String(), envShutdownTimeout.Name+"=") && strings.Contains(log.String(), envLLMDeadline.Name+"=10m0s")
		if warned != c.warn {
			t.Errorf("%v: warned %v, want %v: %q", c.vars, warned, c.warn, log.String())
		}
	}
}
