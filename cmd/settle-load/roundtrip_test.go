package main

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The machine line's round trip is timed against a live server, and a server that cannot
// be reached is said to be not measured rather than reported as free.
func TestRoundTripIsTimedOrSaidNotMeasured(t *testing.T) {
	_, url := pgtest.NewWithURL(t)
	p50, p99 := roundTrip(context.Background(), url)
	if p50 <= 0 || p99 < p50 {
		t.Fatalf("round trip p50 %s, p99 %s: want 0 < p50 <= p99", p50, p99)
	}
	if got := roundTripText(roundTrip(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")); got != "not measured" {
		t.Errorf("an unreachable server's round trip reads %q", got)
	}
}
