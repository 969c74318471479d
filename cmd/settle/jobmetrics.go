package main

import (
	"net"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/web"
)

// jobRunsCollector exports how many jobs this process's workers ran, by outcome, so that
// workers running apart from serve are seen at work, or seen idle while jobs wait.
type jobRunsCollector struct {
	runs *jobs.Runs
	desc *prometheus.Desc
}

func newJobRunsCollector(runs *jobs.Runs) *jobRunsCollector {
	return &jobRunsCollector{runs: runs, desc: prometheus.NewDesc("settle_jobs_run_total",
		"Pipeline jobs this process's workers ran, by the outcome each run left its job in (published, failed, "+
			"queued: put back to wait; unknown: its generation's outcome is; stopped: the run broke off and the job is "+
			"taken over once its lease runs out).", []string{"outcome"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *jobRunsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *jobRunsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.runs.Counts() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n.N), n.Outcome)
	}
}

// processRegistry is a registry holding Go's runtime and the process's collectors, which
// every process that serves /metrics exports.
func processRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// loadWorkerEnv reads what 'settle worker' alone reads: where it serves its metrics and
// probes, and the token its /metrics asks for.
func loadWorkerEnv(cfg *Config, e environ) error {
	if cfg.Command != "worker" {
		return nil
	}
	jc := &cfg.Jobs
	jc.MetricsAddr, jc.MetricsToken = e.get(envWorkerMetricsAddr), e.get(envMetricsToken)
	if a := jc.MetricsAddr; a != "" {
		_, port, err := net.SplitHostPort(a)
		if _, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil {
			return usagef("%s=%q is not host:port, e.g. 127.0.0.1:9091", envWorkerMetricsAddr.Name, a)
		}
	}
	return checkMetricsToken(jc.MetricsToken)
}

// serveWorker starts the listener of 'settle worker' for /metrics, /healthz and /readyz when
// SETTLE_WORKER_METRICS_ADDR is set: reg's collectors, this process's job runs and its
// workers' LLM budget refusals. Call it after the job pool is built; Close stops it.
func (p *Program) serveWorker(jc JobsConfig, reg *prometheus.Registry) error {
	if jc.MetricsAddr == "" {
		return nil
	}
	reg.MustRegister(newJobRunsCollector(p.jobRuns))
	srv := &web.Server{DB: p.DB, ClockSkew: p.gate(), Clock: p.Clock, Logger: p.Logger, Registry: reg,
		MetricsDeps: web.MetricsDeps{MetricsToken: jc.MetricsToken, MetricsElsewhere: true}}
	return p.listenMetrics(jc.MetricsAddr, envWorkerMetricsAddr.Name, srv.WorkerHandler(p.budgets))
}
