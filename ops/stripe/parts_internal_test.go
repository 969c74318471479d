package stripe

import (
	"slices"
	"testing"
)

// The parts of a window cover it exactly, in whole seconds, never more parts than seconds.
func TestWindowPartsCoverTheWindowExactly(t *testing.T) {
	for _, tc := range []struct {
		from, to int64
		n        int
		want     []int64
	}{
		{0, 100, 2, []int64{0, 50, 100}},
		{0, 100, 0, []int64{0, 50, 100}},
		{10, 17, 3, []int64{10, 12, 14, 17}},
		{5, 6, 4, []int64{5, 6}},
		{5, 7, 4, []int64{5, 6, 7}},
		{1000, 1000, 2, []int64{1000, 1000}},
	} {
		if got := windowParts(tc.from, tc.to, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("windowParts(%d, %d, %d) = %v, want %v", tc.from, tc.to, tc.n, got, tc.want)
		}
	}
}
