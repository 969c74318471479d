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

// The soft limit bounds only the memory Go's runtime manages; the resident set counts the
// pages of settle's own binary it has touched as well, about 40 MB of its 90 MB (37 MB of
// them in `settle fake llm` at rest), which no garbage collection gives back. A limit of
// 120 MiB let the resident peak reach 149.9 MB at 500 gateway calls a second on a starved
// 2-core machine; the limit leaves the binary's pages and a margin of 10 MB under 150 MB.
func TestTheMemoryLimitLeavesRoomForTheBinarysPages(t *testing.T) {
	const budget, binaryPages, margin = 150_000_000, 40_000_000, 10_000_000
	if memoryLimit+binaryPages > budget-margin {
		t.Errorf("a memory limit of %d bytes with the binary's %d resident bytes leaves less than %d under %d",
			memoryLimit, binaryPages, margin, budget)
	}
}
