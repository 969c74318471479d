package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// redrawEvery bounds how often the progress line is redrawn: more often than a few times a
// second only costs the terminal work without telling the person anything.
const redrawEvery = 250 * time.Millisecond

// Reporter shows how far a long command is. On a terminal it redraws one line ("reconcile
// stripe: 12/48 refunds · 3.1 refunds/s · 12s left"); elsewhere (a pipe, a file, a log
// collector) it writes nothing to that stream, since redrawn lines are noise there, and logs
// a line at the start, at every tenth of the work and at the end instead.
//
// Start begins a stage and may be called again for the next one; Add counts work done;
// Done ends the stage. A nil *Reporter does nothing, so callers need no checks.
type Reporter struct {
	label    string
	out      io.Writer
	terminal bool
	logger   *slog.Logger
	now      func() time.Time

	mu          sync.Mutex
	active      bool
	unit        string
	total, done int
	started     time.Time
	drawn       time.Time
	logged      int // tenths of the stage already logged
	width       int // length of the line on screen, to blank what a shorter one leaves
}

// newReporter reports on out when it is a terminal, and through logger otherwise.
func newReporter(label string, out io.Writer, logger *slog.Logger) *Reporter {
	return &Reporter{label: label, out: out, terminal: isTerminal(out), logger: logger, now: time.Now}
}

// isTerminal says whether w is a character device, as a terminal is; pipes, files and test
// buffers are not. The standard library suffices, so the module needs no terminal package.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Start begins a stage of total units (0 when unknown), ending the previous one if it was
// left open.
func (p *Reporter) Start(total int, unit string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active {
		p.finish()
	}
	now := p.now()
	p.active, p.unit, p.total, p.done, p.started, p.logged = true, unit, total, 0, now, 0
	if p.terminal {
		p.draw(now)
		return
	}
	p.log("started")
}

// Add counts n more units done.
func (p *Reporter) Add(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.active {
		return
	}
	p.done += n
	now := p.now()
	if p.terminal {
		if now.Sub(p.drawn) >= redrawEvery {
			p.draw(now)
		}
		return
	}
	if p.total > 0 {
		if tenth := min(p.done*10/p.total, 10); tenth > p.logged && tenth < 10 {
			p.logged = tenth
			p.log("progress")
		}
	}
}

// Done ends the stage: the line is drawn a last time and kept, or the end is logged.
func (p *Reporter) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active {
		p.finish()
	}
}

func (p *Reporter) finish() {
	p.active = false
	if p.terminal {
		p.draw(p.now())
		fmt.Fprintln(p.out)
		p.width = 0
		return
	}
	p.log("done")
}

// draw replaces the line on screen: a carriage return goes back to its start, and spaces
// blank what is left of a longer earlier line.
func (p *Reporter) draw(now time.Time) {
	p.drawn = now
	line := p.line(now)
	pad := ""
	if n := p.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	p.width = len(line)
	fmt.Fprint(p.out, "\r"+line+pad)
}

// line is the progress in words: done / total, the rate so far, and the time left at it.
func (p *Reporter) line(now time.Time) string {
	s := fmt.Sprintf("%s: %d %s", p.label, p.done, p.unit)
	if p.total > 0 {
		s = fmt.Sprintf("%s: %d/%d %s", p.label, p.done, p.total, p.unit)
	}
	rate, left, ok := p.pace(now)
	if !ok {
		return s
	}
	s += fmt.Sprintf(" · %.1f %s/s", rate, p.unit)
	if p.total > 0 && p.done < p.total {
		s += " · " + left.String() + " left"
	}
	return s
}

// pace is the rate so far and the time left at it; ok is false before there is any.
func (p *Reporter) pace(now time.Time) (rate float64, left time.Duration, ok bool) {
	elapsed := now.Sub(p.started)
	if elapsed <= 0 || p.done <= 0 {
		return 0, 0, false
	}
	rate = float64(p.done) / elapsed.Seconds()
	if remaining := p.total - p.done; remaining > 0 {
		left = time.Duration(float64(remaining) / rate * float64(time.Second)).Round(time.Second)
	}
	return rate, left, true
}

func (p *Reporter) log(msg string) {
	if p.logger == nil {
		return
	}
	attrs := []any{"task", p.label, "done", p.done, "total", p.total, "unit", p.unit}
	if rate, left, ok := p.pace(p.now()); ok {
		attrs = append(attrs, "rate", fmt.Sprintf("%.1f/s", rate))
		if left > 0 {
			attrs = append(attrs, "left", left)
		}
	}
	p.logger.Info(p.label+": "+msg, attrs...)
}
