package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestDemoStartsAgainOnItsOwnDatabase: `make demo` a second time finds the database of the
// first, with the story's refunds already in it; the live traffic must go on from there, not
// crash on an operation it did not just open.
func TestDemoStartsAgainOnItsOwnDatabase(t *testing.T) {
	testtool.Heavy(t, "the demo started twice")
	t.Parallel()
	root := filepath.Join(pgtest.ProjectDir(), ".settle")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(root, "demo-again-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for run := range 2 {
		cfg, err := LoadConfig([]string{"demo", "--addr", "127.0.0.1:0", "--dir", dir, "--history", "0d"}, env(nil), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		logs := &watchedLog{want: `msg="demo backfill: done"`, seen: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- demoCmd(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)), io.Discard, io.Discard) }()
		select {
		case <-logs.seen:
		case err := <-done:
			t.Fatalf("run %d: the demo stopped before its live traffic began: %v\n%s", run, err, logs.String())
		case <-time.After(3 * time.Minute):
			t.Fatalf("run %d: no live traffic after 3 minutes\n%s", run, logs.String())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if strings.Contains(logs.String(), "demo lost answers") {
			t.Errorf("run %d: the story's lost answers failed:\n%s", run, logs.String())
		}
	}
}

// watchedLog keeps a log and says once when a line holding want was written.
type watchedLog struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchedLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchedLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
