package retain

import (
	"testing"
	"time"
)

func TestParseKeep(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"off": 0, "400d": 400 * 24 * time.Hour, "9600h": 9600 * time.Hour, " 30d ": 30 * 24 * time.Hour} {
		if got, err := ParseKeep(in); err != nil || got != want {
			t.Errorf("ParseKeep(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "-3d", "0d", "1.5d", "soon", "-1h", "0s"} {
		if got, err := ParseKeep(in); err == nil {
			t.Errorf("ParseKeep(%q) = %s, want an error", in, got)
		}
	}
}
