package logbuf

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// counter counts the writes reaching it.
type counter struct {
	mu     sync.Mutex
	writes int
	buf    bytes.Buffer
}

func (c *counter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	return c.buf.Write(p)
}

func (c *counter) get() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.buf.String()
}

// never is an interval no test waits for, so that what reaches the writer did not come from
// the timer.
const never = time.Hour

func logger(c *counter, interval time.Duration) (*slog.Logger, *Writer) {
	w := New(c, interval)
	return slog.New(Handler(slog.NewTextHandler(w, nil), w)), w
}

func TestInfoLinesWaitAndCloseWritesThemAll(t *testing.T) {
	c := &counter{}
	log, w := logger(c, never)
	for i := range 100 {
		log.Info("http request", "n", i)
	}
	if n, _ := c.get(); n != 0 {
		t.Fatalf("100 info lines made %d writes before the buffer filled or was flushed, want 0", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	n, text := c.get()
	if n != 1 || strings.Count(text, "msg=\"http request\"") != 100 {
		t.Fatalf("Close made %d writes holding %d lines, want 1 write of 100", n, strings.Count(text, "\n"))
	}
	log.Info("after close")
	if n, text := c.get(); n != 2 || !strings.HasSuffix(text, "msg=\"after close\"\n") {
		t.Errorf("a line after Close was not written at once (%d writes)", n)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestAWarningGoesOutAtOnceAfterTheLinesBeforeIt(t *testing.T) {
	c := &counter{}
	log, _ := logger(c, never)
	log.Info("first")
	log.With("k", "v").WithGroup("g").Warn("the database is unreachable", "err", "refused")
	n, text := c.get()
	if n != 1 {
		t.Fatalf("the warning reached the writer in %d writes, want 1 right away", n)
	}
	first, warn := strings.Index(text, "msg=first"), strings.Index(text, "level=WARN")
	if first < 0 || warn < first {
		t.Errorf("want the info line then the warning, got:\n%s", text)
	}
	log.Error("failed")
	if n, _ := c.get(); n != 2 {
		t.Errorf("an error line was held (%d writes)", n)
	}
}

func TestTheIntervalWritesAHeldLine(t *testing.T) {
	c := &counter{}
	log, w := logger(c, 10*time.Millisecond)
	defer w.Close()
	log.Info("held")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, text := c.get(); n == 1 && strings.Contains(text, "msg=held") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a held line was not written after the interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAFullBufferIsWrittenAndLongLinesKeepWhole(t *testing.T) {
	c := &counter{}
	w := New(c, never)
	line := []byte(strings.Repeat("x", 999) + "\n")
	for range Size * 3 / 2 / len(line) {
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	n, text := c.get()
	if n != 1 || len(text)%len(line) != 0 || len(text) > Size {
		t.Errorf("after a buffer and a half: %d writes of %d bytes, want 1 whole buffer of lines", n, len(text))
	}
	long := bytes.Repeat([]byte("y"), Size+1)
	if _, err := w.Write(long); err != nil {
		t.Fatal(err)
	}
	if n, text := c.get(); n != 3 || !strings.HasSuffix(text, string(long)) {
		t.Errorf("a line longer than the buffer: %d writes, want the held lines then the line", n)
	}
}

func TestConcurrentLinesStayWhole(t *testing.T) {
	c := &counter{}
	log, w := logger(c, time.Millisecond)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				log.InfoContext(context.Background(), "line", "g", g, "i", i)
			}
		})
	}
	wg.Wait()
	w.Close()
	_, text := c.get()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "time=") || !strings.Contains(l, "msg=line g=") {
			t.Fatalf("a line was torn: %q", l)
		}
	}
}

// Holding a line copies it into the buffer the Writer was made with, and a full buffer is
// written from there: no allocation a line.
func TestAHeldLineAllocatesNothing(t *testing.T) {
	w := New(io.Discard, never)
	defer w.Close()
	line := []byte("time=2026-12-06T06:00:00Z level=INFO msg=\"http request\" method=POST route=/v1/chat/completions status=200\n")
	if n := testing.AllocsPerRun(1000, func() { _, _ = w.Write(line) }); n != 0 {
		t.Errorf("a held line makes %v allocations, want 0", n)
	}
}
