// Package logbuf batches a process's log lines into few writes. Under load the access log
// wrote one line per request, each its own write(2) to stderr, and those system calls were
// a large share of the server's CPU. A Writer gathers lines in memory and writes them out
// when its buffer fills, a short interval after the first line it holds, when a line at
// warning level or above is logged (Handler), and when it is closed.
//
// What a clean stop logged is all written: the process closes the Writer on every way out
// of a command. A crash (a kill, a fault in the runtime) loses at most the lines of the
// last interval, and never a warning or an error, which go out with everything before them
// as soon as they are logged.
package logbuf

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Size is the buffer a Writer holds. A request's access line is a few hundred bytes, so
// at hundreds of requests a second the interval, not the size, usually ends a batch.
const Size = 64 << 10

// Interval is how long a line may wait in the buffer before it is written.
const Interval = 150 * time.Millisecond

// Writer is an io.Writer that batches what it is given into writes to another one. It is
// safe for concurrent use; each Write is kept whole, so lines from several goroutines do
// not interleave.
type Writer struct {
	out      io.Writer
	interval time.Duration

	mu     sync.Mutex
	buf    []byte
	timer  *time.Timer
	armed  bool
	closed bool
}

// New returns a Writer that writes to out at most interval after it was given a line.
func New(out io.Writer, interval time.Duration) *Writer {
	w := &Writer{out: out, interval: interval, buf: make([]byte, 0, Size)}
	w.timer = time.AfterFunc(time.Hour, func() { _ = w.Flush() })
	w.timer.Stop()
	return w
}

// Write keeps p to write later, or writes it now when the buffer is full or the Writer is
// closed. It reports an error only when it wrote and the underlying writer failed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.out.Write(p)
	}
	if len(w.buf)+len(p) > cap(w.buf) {
		if err := w.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > cap(w.buf) {
			return w.out.Write(p)
		}
	}
	w.buf = append(w.buf, p...)
	if !w.armed {
		w.armed = true
		w.timer.Reset(w.interval)
	}
	return len(p), nil
}

// Flush writes everything buffered now.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

func (w *Writer) flushLocked() error {
	if w.armed {
		w.armed = false
		w.timer.Stop()
	}
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.out.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// Close writes everything buffered and makes later writes go straight through, for lines
// logged by goroutines that outlive the command. Calling it again does nothing.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	err := w.flushLocked()
	w.closed = true
	return err
}

// Handler returns a handler that logs through h, which writes to w, and flushes w after
// each record at warning level or above: an operator waiting for a warning or an error
// sees it at once, after every line logged before it.
func Handler(h slog.Handler, w *Writer) slog.Handler {
	return &handler{Handler: h, w: w}
}

type handler struct {
	slog.Handler
	w *Writer
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if ferr := h.w.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &handler{Handler: h.Handler.WithAttrs(attrs), w: h.w}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{Handler: h.Handler.WithGroup(name), w: h.w}
}
