//go:build !race

// Package racedetect tells tests whether the race detector is on: under it, allocation counts
// grow (the detector's own bookkeeping) and sync.Pool drops some of what is put back on
// purpose, so a test pinning allocations can only hold without it.
package racedetect

// Enabled is true when the binary was built with the race detector.
const Enabled = false
