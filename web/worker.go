package web

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/ops/llm"
)

// WorkerHandler serves the listener of a process that runs job workers without the HTTP
// server ('settle worker'): /metrics to whoever reaches the listener (bearing MetricsToken
// when it is set), as on serve's listener of its own, and /healthz and /readyz as Handler
// serves them; nothing else. budgets are the process's tenants' LLM budgets, whose refusals
// its job workers count (nil: none). Set Registry (the process's collectors), DB (readiness,
// and the tenants' names the refusals are labelled with), ClockSkew and Logger first.
func (s *Server) WorkerHandler(budgets *llm.Budgets) http.Handler {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Registry == nil {
		s.Registry = prometheus.NewRegistry()
	}
	if budgets != nil {
		s.registerBudgetRefusals(budgetsRefusals{budgets})
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metricsHandler(false))
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.HandleFunc("GET /readyz", s.handleReady)
	return mux
}
