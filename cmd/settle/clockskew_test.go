package main

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// offsetClock is the system clock moved by an offset the test sets, as on a host whose
// clock drifted.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().UTC().Add(time.Duration(c.off.Load())) }

func (c *offsetClock) set(d time.Duration) { c.off.Store(int64(d)) }

// skewedProgram is serve's program on a fresh database whose clock runs off by off.
func skewedProgram(t *testing.T, off time.Duration) (*Program, *offsetClock) {
	t.Helper()
	cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0"},
		env(map[string]string{"DATABASE_URL": pgtest.URL(pgtest.NewDatabase(t)), "SETTLE_RECONCILE_INTERVAL": "off"}), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &offsetClock{}
	clock.set(off)
	p := NewProgram(cfg, testLogger(t))
	p.Clock = clock
	return p, clock
}

// Serve whose clock runs a lease ahead of the database's refuses to start, with one line
// naming both clocks and how far apart they are, before it listens or takes any lease (a
// replica that far off would take over live leases, ops rule 11). The binary runs on the
// system clock, which a test cannot move, so this runs serve's Program, the one Main runs,
// and the line Main prints; TestServeOnPortZero runs the wiring on a clock in step.
func TestServeRefusesAClockOffTheDatabases(t *testing.T) {
	t.Parallel()
	for _, off := range []time.Duration{time.Minute, -time.Minute} {
		p, _ := skewedProgram(t, off)
		err := p.Run(context.Background())
		if err == nil {
			t.Errorf("serve started on a clock %s off the database's", off)
			p.Close()
			continue
		}
		line := errorLine(err)
		if !errors.Is(err, ops.ErrClockSkew) || strings.Contains(line, "\n") || !strings.Contains(line, "database server's") ||
			!regexp.MustCompile(`(59\.9\d*s|1m0(\.0\d*)?s) apart, past the limit of 3s`).MatchString(line) {
			t.Errorf("serve on a clock %s off: %q, want one line naming both clocks, the difference and the limit", off, line)
		}
		if p.URL() != "" {
			t.Errorf("serve on a clock %s off listens at %s", off, p.URL())
		}
		var leases int
		if err := p.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM leases`).Scan(&leases); err != nil || leases != 0 {
			t.Errorf("serve on a clock %s off took %d leases (%v)", off, leases, err)
		}
		p.Close()
	}
}

// While serving, a clock that drifts past the limit makes the replica not ready and shows
// on settle_clock_skew_seconds; back in step, it is ready again.
func TestReadinessAndTheGaugeFollowTheClockSkew(t *testing.T) {
	t.Parallel()
	p, clock := skewedProgram(t, 0)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	check := func(off time.Duration, ready int) {
		t.Helper()
		clock.set(off)
		_ = p.skew.Check(ctx)
		if code, body := getWith(t, p.URL()+"/readyz"); code != ready {
			t.Errorf("/readyz with the clock %s off = %d, want %d\n%s", off, code, ready, body)
		}
		// Requests are admitted through the same gate (TestASkewedReplicaAdmitsNoRequest).
		if p.Ledger.Gate == nil || (p.Ledger.Gate.Open() == nil) != (ready == http.StatusOK) {
			t.Errorf("the ledger's admission with the clock %s off is not gated by the skew guard", off)
		}
		_, body := getWith(t, p.URL()+"/metrics")
		m := regexp.MustCompile(`(?m)^settle_clock_skew_seconds (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no settle_clock_skew_seconds on /metrics")
		}
		got, _ := strconv.ParseFloat(m[1], 64)
		if want := off.Seconds(); got < want-1 || got > want+1 {
			t.Errorf("settle_clock_skew_seconds with the clock %s off = %v, want about %v", off, got, want)
		}
	}
	check(0, http.StatusOK)
	check(time.Minute, http.StatusServiceUnavailable)
	check(-time.Minute, http.StatusServiceUnavailable)
	check(0, http.StatusOK)
}
