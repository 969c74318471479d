package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/anthropic"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestServeReconcilesAnthropicUsageWithTheAdminKey: with SETTLE_ANTHROPIC_ADMIN_KEY, serve's
// background reconciler reads Anthropic's Messages usage report with it and completes a run
// under Anthropic's own lease; without it, nothing asks for the report. The admin key needs
// the base URL, and a key id needs the admin key.
func TestServeReconcilesAnthropicUsageWithTheAdminKey(t *testing.T) {
	t.Parallel()
	const admin = "sk-ant-admin01-serve"
	a := fake.NewAnthropic(fake.AnthropicOptions{AdminKey: admin})
	base, err := a.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	db := pgtest.URL(pgtest.NewDatabase(t))
	reads := func() int {
		n := 0
		for _, r := range a.Requests() {
			if r.Path == anthropic.UsagePath {
				n++
			}
		}
		return n
	}
	for _, key := range []string{"", admin} {
		cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0", "--migrate"}, env(map[string]string{"DATABASE_URL": db,
			"SETTLE_ANTHROPIC_BASE_URL": base, "SETTLE_ANTHROPIC_API_KEY": "sk-ant-api03-serve", "SETTLE_ANTHROPIC_ADMIN_KEY": key,
			"SETTLE_ANTHROPIC_API_KEY_ID": map[bool]string{true: fake.AnthropicKeyID("sk-ant-api03-serve")}[key != ""]}), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		p := NewProgram(cfg, testLogger(t))
		if err := p.Run(ctx); err != nil {
			t.Fatal(err)
		}
		done := false
		for deadline := time.Now().Add(10 * time.Second); key != "" && !done && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			err := p.DB.Pool.QueryRow(ctx, `SELECT done_until IS NOT NULL FROM recon_runs WHERE name = 'reconcile:anthropic'`).Scan(&done)
			if err != nil && !strings.Contains(err.Error(), "no rows") {
				t.Fatal(err)
			}
		}
		if key == "" {
			time.Sleep(500 * time.Millisecond) // the reconciler's first pass runs at once
		}
		p.Close()
		switch {
		case key == "" && reads() != 0:
			t.Fatalf("without the admin key the usage report was read %d times", reads())
		case key != "" && (!done || reads() == 0):
			t.Fatalf("with the admin key: run done %v, %d reads of the usage report", done, reads())
		}
	}
	for vars, want := range map[[2]string]string{
		{"SETTLE_ANTHROPIC_ADMIN_KEY", admin}:              "SETTLE_ANTHROPIC_ADMIN_KEY needs SETTLE_ANTHROPIC_BASE_URL",
		{"SETTLE_ANTHROPIC_API_KEY_ID", "apikey_01settle"}: "it needs SETTLE_ANTHROPIC_ADMIN_KEY",
	} {
		e := map[string]string{"DATABASE_URL": db, vars[0]: vars[1]}
		if vars[0] == "SETTLE_ANTHROPIC_API_KEY_ID" {
			e["SETTLE_ANTHROPIC_BASE_URL"] = base
		}
		if _, err := LoadConfig([]string{"serve"}, env(e), t.TempDir()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s alone: %v, want %q", vars[0], err, want)
		}
	}
}
