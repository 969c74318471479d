package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// roundTrips is how many SELECT 1 the round-trip probe times, after as many unmeasured.
const roundTrips = 2000

// roundTrip times a SELECT 1 from one client over url's connection, one after another,
// and returns its p50 and p99. It is the host's price of a hand-off between two processes:
// every gateway call makes about a dozen (client, Settle, Postgres, the fake and back), so
// a host where this takes 150 µs adds milliseconds that no code of Settle spends. Zeros
// when the probe fails.
func roundTrip(ctx context.Context, url string) (p50, p99 time.Duration) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, 0
	}
	defer conn.Close(ctx)
	took := make([]time.Duration, 0, roundTrips)
	var one int
	for i := range 2 * roundTrips {
		start := time.Now()
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			return 0, 0
		}
		if i >= roundTrips {
			took = append(took, time.Since(start))
		}
	}
	slices.Sort(took)
	return took[len(took)/2], took[len(took)*99/100]
}

// roundTripText words the probe's figures for the report's machine line.
func roundTripText(p50, p99 time.Duration) string {
	if p50 == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%d / %d µs at p50 / p99", p50.Microseconds(), p99.Microseconds())
}
