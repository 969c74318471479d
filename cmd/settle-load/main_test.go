package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The figures the report prints come from these; the run itself needs Postgres and the
// binary, and is `make load`.
func TestQuantileClassesAndStreams(t *testing.T) {
	lat := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if q := quantile(lat, 0.5); q != 5 {
		t.Errorf("p50 of 1..10 = %d, want 5", q)
	}
	if q := quantile(lat, 0.99); q != 10 {
		t.Errorf("p99 of 1..10 = %d, want 10", q)
	}
	if q := quantile(nil, 0.99); q != 0 {
		t.Errorf("p99 of nothing = %d", q)
	}
	for _, c := range []struct {
		status int
		code   string
		want   string
	}{{200, "", class2xx}, {202, "", class2xx}, {409, "idempotency_key_in_use", classInFlight}, {409, "outcome_unknown", class409Other},
		{422, "idempotency_key_reused", class422}, {429, "upstream_rate_limited", class429}, {504, "upstream_timeout", class5xx}, {400, "x", class4xxOther}} {
		if got := classOf(c.status, c.code, nil); got != c.want {
			t.Errorf("classOf(%d, %s) = %s, want %s", c.status, c.code, got, c.want)
		}
	}
	share := 0.0
	for _, m := range intentMix {
		share += m.share
	}
	if math.Abs(share-1) > 1e-9 {
		t.Errorf("the intent mix adds up to %v, want 1", share)
	}
	if class, id := readStream(strings.NewReader("data: {\"id\":\"chatcmpl-1\"}\n\ndata: [DONE]\n\n")); class != class2xx || id != "chatcmpl-1" {
		t.Errorf("a whole stream reads as %s %s", class, id)
	}
	if class, _ := readStream(strings.NewReader("data: {\"id\":\"chatcmpl-1\"}\n\n")); class != classStreamCut {
		t.Errorf("a stream without [DONE] reads as %s", class)
	}
	if class, _ := readStream(strings.NewReader("data: {\"error\":{\"message\":\"x\"}}\n\n")); class != classStreamFail {
		t.Errorf("a stream ending in an error reads as %s", class)
	}
}
