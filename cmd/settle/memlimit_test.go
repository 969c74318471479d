package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// settle runs with a soft memory limit unless the operator set one with GOMEMLIMIT: with
// the garbage collector's target raised (gcPercent), only the limit keeps the heap, and so
// the resident memory, from growing with a backlog of requests on a starved machine.
func TestTuneGCSetsASoftMemoryLimit(t *testing.T) {
	prevGC := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(prevGC)
		debug.SetMemoryLimit(prevLimit)
	})
	tuneGC(func(k string) string {
		if k == "GOMEMLIMIT" {
			return "1GiB"
		}
		return ""
	})
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("with GOMEMLIMIT set, the memory limit became %d, want it left as the runtime set it", got)
	}
	tuneGC(func(string) string { return "" })
	if got := debug.SetMemoryLimit(-1); got != memoryLimit {
		t.Fatalf("without GOMEMLIMIT, the memory limit is %d, want %d", got, memoryLimit)
	}
}
