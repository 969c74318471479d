package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// fakeReporter is a Reporter over a buffer, with the terminal check decided by the test
// and a clock it moves by hand.
func fakeReporter(terminal bool) (*Reporter, *bytes.Buffer, *bytes.Buffer, *time.Time) {
	var out, logs bytes.Buffer
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	p := newReporter("reconciled", &out, slog.New(slog.NewTextHandler(&logs, nil)))
	p.terminal = terminal
	p.now = func() time.Time { return now }
	return p, &out, &logs, &now
}

func TestReporterTerminalRedrawsOneLine(t *testing.T) {
	t.Parallel()
	p, out, logs, now := fakeReporter(true)
	p.Start(48, "hours")
	for range 12 {
		*now = now.Add(time.Second / 3)
		p.Add(1)
	}
	// 12 done in 4 s: 3 per second, 36 left, 12 s.
	want := "\rreconciled: 12/48 hours · 3.0 hours/s · 12s left"
	if !strings.HasSuffix(out.String(), want) {
		t.Fatalf("terminal shows %q, want it to end with %q", out.String(), want)
	}
	if strings.Contains(out.String(), "\n") {
		t.Fatalf("the line is redrawn in place, got a newline: %q", out.String())
	}
	// Adds closer together than the redraw interval draw nothing.
	before := out.Len()
	p.Add(1)
	if out.Len() != before {
		t.Fatalf("redrawn within %v of the last draw: %q", redrawEvery, out.String()[before:])
	}
	*now = now.Add(12 * time.Second)
	p.Add(35)
	p.Done()
	if !strings.HasSuffix(out.String(), "\rreconciled: 48/48 hours · 3.0 hours/s\n") {
		t.Fatalf("the last line is %q", out.String())
	}
	if logs.Len() != 0 {
		t.Fatalf("on a terminal nothing is logged: %q", logs.String())
	}
}

func TestReporterBlanksLongerLine(t *testing.T) {
	t.Parallel()
	p, out, _, now := fakeReporter(true)
	p.Start(100, "refunds")
	*now = now.Add(time.Second)
	p.Add(1) // "… · 1.0 refunds/s · 1m39s left"
	*now = now.Add(time.Second)
	p.Add(98) // "… · 49.5 refunds/s · 0s left", shorter
	lines := strings.Split(out.String(), "\r")
	last, prev := lines[len(lines)-1], lines[len(lines)-2]
	if len(last) < len(prev) {
		t.Fatalf("%q leaves part of %q on screen", last, prev)
	}
}

func TestReporterElsewhereLogsTenths(t *testing.T) {
	t.Parallel()
	p, out, logs, now := fakeReporter(false)
	p.Start(40, "refunds")
	for range 40 {
		*now = now.Add(100 * time.Millisecond)
		p.Add(1)
	}
	p.Done()
	if out.Len() != 0 {
		t.Fatalf("not a terminal, yet it wrote %q", out.String())
	}
	got := logs.String()
	// start, 10 % … 90 %, end
	if n := strings.Count(got, "\n"); n != 11 {
		t.Fatalf("%d log lines, want 11:\n%s", n, got)
	}
	for _, want := range []string{"reconciled: started", "done=4 total=40", "reconciled: done", "done=40 total=40", "rate=10.0/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %q:\n%s", want, got)
		}
	}
}

func TestReporterNilAndUnknownTotal(t *testing.T) {
	t.Parallel()
	var none *Reporter
	none.Start(3, "steps")
	none.Add(1)
	none.Done()
	p, out, _, now := fakeReporter(true)
	p.Start(0, "pages")
	*now = now.Add(2 * time.Second)
	p.Add(4)
	if !strings.HasSuffix(out.String(), "\rreconciled: 4 pages · 2.0 pages/s") {
		t.Fatalf("unknown total shows %q", out.String())
	}
	if isTerminal(&bytes.Buffer{}) {
		t.Fatal("a buffer is not a terminal")
	}
}
