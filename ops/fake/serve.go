package fake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// loopServer is the lifecycle of a fake's HTTP server: it listens on loopback only, serves
// in the background, and on close stops the server and wakes every wait of the fake.
type loopServer struct {
	name string
	log  *slog.Logger

	done      chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	srv       *http.Server
	closed    bool
}

func newLoopServer(name string, log *slog.Logger) *loopServer {
	return &loopServer{name: name, log: log, done: make(chan struct{})}
}

// start listens on addr (loopback only; "" means 127.0.0.1 on a free port) and serves h in
// the background. It returns the host:port it listens on.
func (s *loopServer) start(addr string, h http.Handler) (string, error) {
	addr, err := loopbackAddr(addr)
	if err != nil {
		return "", fmt.Errorf("%s: %w", s.name, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s: listen: %w", s.name, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	if s.srv != nil || s.closed {
		s.mu.Unlock()
		ln.Close()
		return "", fmt.Errorf("%s: already started or closed", s.name)
	}
	s.srv = srv
	s.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(s.name+": serve", "err", err)
		}
	}()
	return ln.Addr().String(), nil
}

// close stops the server and wakes the waits. Safe to call more than once.
func (s *loopServer) close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		s.mu.Lock()
		srv := s.srv
		s.closed = true
		s.mu.Unlock()
		if srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			if e := srv.Shutdown(ctx); e != nil {
				err = errors.Join(fmt.Errorf("%s: shutdown: %w", s.name, e), srv.Close())
			}
			cancel()
		}
	})
	return err
}

// sleep waits d and reports whether it ran to the end; close or ctx cut it short.
func (s *loopServer) sleep(ctx context.Context, d time.Duration) bool {
	return sleepUnless(ctx, s.done, d)
}

// sleepUnless waits d and reports whether it ran to the end: a closed done (the fake shutting
// down) or ctx cuts it short. Every fake's faults that hold an answer wait through it.
func sleepUnless(ctx context.Context, done <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	case <-ctx.Done():
		return false
	}
}
