//go:build race

package racedetect

// Enabled is true when the binary was built with the race detector.
const Enabled = true
