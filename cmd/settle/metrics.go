package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/web"
)

// metricsListener is /metrics's own listener and server: serve's when SETTLE_METRICS_ADDR
// is set, that of 'settle worker' when SETTLE_WORKER_METRICS_ADDR is.
type metricsListener struct {
	listener net.Listener
	server   *http.Server
	log      *slog.Logger
}

// serveMetrics starts /metrics's own listener when SETTLE_METRICS_ADDR is set; srv's
// MetricsDeps already took /metrics off the main one. Call it after srv.Handler.
func (p *Program) serveMetrics(srv *web.Server) error {
	addr := p.Config.Web.MetricsAddr
	if addr == "" {
		return nil
	}
	return p.listenMetrics(addr, envMetricsAddr.Name, srv.MetricsHandler())
}

// listenMetrics listens on addr, which the setting named setting gave, and serves h there
// in the background until the listener is closed.
func (p *Program) listenMetrics(addr, setting string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return &ops.Error{Code: ops.ECONFLICT, Err: err,
			Message: fmt.Sprintf("listen on %s for /metrics: address already in use; choose another %s", addr, setting)}
	} else if err != nil {
		return fmt.Errorf("listen on %s for /metrics: %w", addr, err)
	}
	p.metrics = metricsListener{listener: ln, log: p.Logger, server: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(p.Logger.Handler(), slog.LevelWarn),
	}}
	go func() {
		// A broken metrics listener costs scrapes, not requests: it is logged, and the
		// program goes on serving.
		if err := p.metrics.server.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			p.Logger.Error("serve /metrics", "addr", addr, "err", err)
		}
	}()
	return nil
}

// MetricsURL is where /metrics's own listener answers, or "" without one.
func (p *Program) MetricsURL() string {
	if p.metrics.listener == nil {
		return ""
	}
	return "http://" + p.metrics.listener.Addr().String()
}

// close stops the listener; a scrape in flight gets a few seconds to finish.
func (m *metricsListener) close() {
	if m.server == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.server.Shutdown(ctx); err != nil {
		m.log.Warn("shut down /metrics", "err", err)
	}
}
