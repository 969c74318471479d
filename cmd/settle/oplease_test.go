package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// SETTLE_OPERATION_LEASE sets the lease of the operations serve sends, shortens the waits
// between a call's attempts to half of it and has the reaper pass at least every half lease;
// by default nothing changes.
func TestOperationLeaseSetting(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(pgtest.NewDatabase(t))
	cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0"},
		env(map[string]string{"DATABASE_URL": url, "SETTLE_OPERATION_LEASE": "5s", "SETTLE_RECONCILE_INTERVAL": "off", "SETTLE_WORKERS": "0"}), t.TempDir())
	if err != nil || cfg.OperationLease != 5*time.Second {
		t.Fatalf("SETTLE_OPERATION_LEASE=5s read as %s (%v)", cfg.OperationLease, err)
	}
	p := NewProgram(cfg, testLogger(t))
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if lim := p.Ledger.Limits; lim.Lease != 5*time.Second || lim.MaxBackoff != 2500*time.Millisecond || lim.KeyInUseMaxWait != 2500*time.Millisecond {
		t.Errorf("serve's limits under a 5 s lease: %+v", lim)
	}
	if got := reaperInterval(5 * time.Second); got != 2500*time.Millisecond {
		t.Errorf("reaper interval under a 5 s lease: %s", got)
	}

	def, err := LoadConfig([]string{"serve"}, env(map[string]string{"DATABASE_URL": url}), t.TempDir())
	if err != nil || def.OperationLease != ops.DefaultLimits.Lease || operationLimits(ops.DefaultLimits, def.OperationLease) != ops.DefaultLimits ||
		reaperInterval(def.OperationLease) != 5*time.Second {
		t.Errorf("default lease %s (%v) changes the limits or the reaper's 5 s", def.OperationLease, err)
	}

	for v, want := range map[string]string{"2s": "SETTLE_OPERATION_LEASE=2s is outside 5s to 10m0s", "1h": "outside", "soon": "not a positive Go duration"} {
		code, _, stderr := run(t, []string{"serve"}, map[string]string{"DATABASE_URL": url, "SETTLE_OPERATION_LEASE": v}, "")
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("SETTLE_OPERATION_LEASE=%s: exit %d, stderr %q; want 2 and %q", v, code, stderr, want)
		}
	}
}
