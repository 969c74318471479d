package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestFakeDurationsMustMakeSense: 'fake stripe --retention 0' (or -1h), meant to try a key
// that expires at once, kept keys for the default 24 hours without a word, and 'fake llm
// --latency -1s' started as if it were 0. Each is refused in one line with exit 2, and no
// fake is started.
func TestFakeDurationsMustMakeSense(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fake", "stripe", "--addr", "127.0.0.1:0", "--retention", "0"}, "--retention"},
		{[]string{"fake", "stripe", "--addr", "127.0.0.1:0", "--retention", "-1h"}, "--retention"},
		{[]string{"fake", "llm", "--addr", "127.0.0.1:0", "--latency", "-1s"}, "--latency"},
		{[]string{"fake", "llm", "--addr", "127.0.0.1:0", "--chunk-delay", "-5ms"}, "--chunk-delay"},
		{[]string{"fake", "anthropic", "--addr", "127.0.0.1:0", "--latency", "-1s"}, "--latency"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var stdout, stderr bytes.Buffer
		code := Main(ctx, tc.args, envList(nil), strings.NewReader(""), &stdout, &stderr)
		cancel()
		refusedInOneLine(t, tc.args, code, stdout.String(), stderr.String(), tc.want)
	}
}
