package alerts

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics Settle exports for Prometheus rules. Counters count rows recorded in the
// database since this process started (so a restart is a counter reset, which increase()
// handles); every replica exports the same counts, and the exported rules take the max over
// instances. The counters of client requests, operations and attempts carry the API an LLM
// operation called (api="chat_completions", "responses", "embeddings", "messages"; empty for
// others), as do the possible duplicates. The client requests carry the reason a refused
// one was refused (reason="tenant_budget_spent", ...; empty for any other).
const (
	MetricClientRequests    = "settle_client_requests_total"
	MetricAttempts          = "settle_attempts_total"
	MetricOperationsCreated = "settle_operations_created_total"
	MetricOperationsClosed  = "settle_operations_closed_total"
	MetricProviderCharges   = "settle_provider_charges_total"
	MetricOperationsOpen    = "settle_operations_open"
	MetricOldestOpenAge     = "settle_oldest_open_operation_age_seconds"
	MetricSourceUp          = "settle_metrics_source_up"
	// MetricFailedAfterSuccess counts the open exceptions of refunds accepted and failed later.
	MetricFailedAfterSuccess = "settle_refunds_failed_after_success_open"
	// MetricPossibleDuplicates counts LLM resends after an uncertain send: each may have been
	// billed twice, so their rate is the suspicion of double billing.
	MetricPossibleDuplicates = "settle_llm_possible_duplicate_attempts_total"
)

// Tally is a number of rows recorded in a window for one counter and label set.
type Tally struct {
	Metric string
	Labels map[string]string
	N      float64
}

// MetricsSource reads what the collector exports.
type MetricsSource interface {
	// TallySince counts the rows behind each counter recorded in [from, to). An attempt is
	// counted when it finishes, by its outcome, and a client request when it is answered, by
	// its answer; a request still unanswered AnswerReach after it arrived is counted then, as
	// unanswered, and not again when an answer comes later. Every attempt unfinished and
	// every request unanswered when the previous call counted began at or after since. It
	// returns the since of the next call: the start of the oldest attempt, or the arrival of
	// the oldest request, begun before to and not finished or answered by to; or to.
	TallySince(ctx context.Context, since, from, to time.Time) ([]Tally, time.Time, error)
	// Backlog is Source.Backlog: open operations and the age of the oldest, now.
	Backlog(ctx context.Context, now time.Time) ([]Row, error)
}

var counterLabels = map[string][]string{
	MetricClientRequests:     {"tenant", "kind", "provider", "answer", "duplicate", "api", "reason"},
	MetricAttempts:           {"tenant", "kind", "provider", "outcome", "api"},
	MetricOperationsCreated:  {"tenant", "kind", "provider", "api"},
	MetricOperationsClosed:   {"tenant", "kind", "provider", "status", "api"},
	MetricProviderCharges:    {"tenant", "kind", "provider", "orphan", "double"},
	MetricPossibleDuplicates: {"tenant", "kind", "provider", "api"},
}

var counterHelp = map[string]string{
	MetricClientRequests:     "Client requests recorded, by how they were answered, whether they repeated an existing intent, and why a refused one was refused (reason); counted when answered, or as unanswered an hour after arrival.",
	MetricAttempts:           "Attempts sent to providers, counted when they finish, by outcome and, for LLM calls, the API called (chat_completions, responses, embeddings, messages; empty for others).",
	MetricOperationsCreated:  "Operations created.",
	MetricOperationsClosed:   "Operations closed, by final status.",
	MetricProviderCharges:    "Provider charges recorded; orphan: no operation; double: not the first charge of its operation (for LLM calls, each extra generation of a double-charge exception).",
	MetricPossibleDuplicates: "LLM attempts sent after an uncertain attempt of the same operation, which the provider may have billed twice, by the API called; counted when they finish.",
}

// AnswerReach is how long after its start an attempt's outcome, and after its arrival a
// client request's answer, is still counted on /metrics: well past the longest attempt (ten
// minutes for an LLM call by default), which a request that waits for it outlasts little.
// Counting a request only once answered keeps a late answer from being frozen as
// unanswered; the reach keeps a request never answered from being left out.
const AnswerReach = time.Hour

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Collector exports Settle's ledger counters on /metrics. It reads the database at most
// every MinRefresh however often it is scraped, and counts rows only once they are Lag old,
// so a row committed a little late is still counted.
type Collector struct {
	Source     MetricsSource
	Clock      Clock
	Lag        time.Duration
	MinRefresh time.Duration
	Timeout    time.Duration
	Logger     *slog.Logger

	mu        sync.Mutex
	watermark time.Time
	// attemptsSince bounds the start of the attempts the next read may see finish, and the
	// arrival of the requests it may see answered: the oldest still open at the last read. An
	// attempt outlasts the lag often (an LLM stream may run for minutes), and counted when it
	// started it would never show its outcome; a request that waits for it, its answer.
	attemptsSince time.Time
	lastRefresh   time.Time
	totals        map[string]*Tally
	backlog       []Row
	up            bool
	descs         map[string]*prometheus.Desc
}

// NewCollector returns a collector counting from now.
func NewCollector(src MetricsSource, clock Clock, logger *slog.Logger) *Collector {
	c := &Collector{Source: src, Clock: clock, Lag: time.Minute, MinRefresh: 10 * time.Second, Timeout: 5 * time.Second,
		Logger: logger, totals: map[string]*Tally{}, watermark: clock.Now().Add(-time.Minute)}
	// Attempts that began before this process and end after it started are counted too.
	c.attemptsSince = c.watermark.Add(-AnswerReach)
	c.descs = map[string]*prometheus.Desc{
		MetricOperationsOpen: prometheus.NewDesc(MetricOperationsOpen, "Open operations now, by status.",
			[]string{"tenant", "kind", "provider", "status"}, nil),
		MetricOldestOpenAge: prometheus.NewDesc(MetricOldestOpenAge, "Age of the oldest open operation, by status.",
			[]string{"tenant", "kind", "provider", "status"}, nil),
		MetricSourceUp: prometheus.NewDesc(MetricSourceUp, "1 when the last read of the ledger counters succeeded.", nil, nil),
		MetricFailedAfterSuccess: prometheus.NewDesc(MetricFailedAfterSuccess,
			"Open exceptions of refunds the provider accepted and failed later.", []string{"tenant", "kind", "provider"}, nil),
	}
	for m, l := range counterLabels {
		c.descs[m] = prometheus.NewDesc(m, counterHelp[m], l, nil)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A failed read keeps the last numbers and says
// so in settle_metrics_source_up, rather than failing the whole scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Clock.Now()
	if c.lastRefresh.IsZero() || now.Sub(c.lastRefresh) >= c.MinRefresh {
		c.lastRefresh = now
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
		err := c.refresh(ctx, now)
		cancel()
		c.up = err == nil
		if err != nil {
			c.logger().Warn("read ledger counters for /metrics", "err", err)
		}
	}
	up := 0.0
	if c.up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.descs[MetricSourceUp], prometheus.GaugeValue, up)
	for _, k := range sortedKeys(c.totals) {
		t := c.totals[k]
		names := counterLabels[t.Metric]
		vals := make([]string, len(names))
		for i, n := range names {
			vals[i] = t.Labels[n]
		}
		ch <- prometheus.MustNewConstMetric(c.descs[t.Metric], prometheus.CounterValue, t.N, vals...)
	}
	for _, r := range c.backlog {
		if n, ok := r.Values[FailedAfterSuccess]; ok {
			ch <- prometheus.MustNewConstMetric(c.descs[MetricFailedAfterSuccess], prometheus.GaugeValue, n, r.Tenant, r.Kind, r.Provider)
		}
		for _, s := range []struct {
			count, age Signal
			status     string
		}{{UnknownOperations, OldestUnknown, "unknown"}, {ExpiredOperations, OldestExpired, "expired"},
			{ReceivedOperations, OldestReceived, "received"}, {InProgressOperations, OldestInProgress, "in_progress"}} {
			n, ok := r.Values[s.count]
			if !ok {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.descs[MetricOperationsOpen], prometheus.GaugeValue, n, r.Tenant, r.Kind, r.Provider, s.status)
			ch <- prometheus.MustNewConstMetric(c.descs[MetricOldestOpenAge], prometheus.GaugeValue, r.Values[s.age], r.Tenant, r.Kind, r.Provider, s.status)
		}
	}
}

func (c *Collector) refresh(ctx context.Context, now time.Time) error {
	to := now.Add(-c.Lag)
	if to.After(c.watermark) {
		tallies, since, err := c.Source.TallySince(ctx, c.attemptsSince, c.watermark, to)
		if err != nil {
			return err
		}
		// An attempt still running after AnswerReach (the longest runs for ten minutes, then
		// the reaper ends it) is stuck, and a request unanswered then is counted as such: they
		// stop holding every later read back to their start.
		c.attemptsSince = maxTime(since, to.Add(-AnswerReach))
		for _, t := range tallies {
			k := t.Metric + labelString(t.Labels)
			if c.totals[k] == nil {
				c.totals[k] = &Tally{Metric: t.Metric, Labels: t.Labels}
			}
			c.totals[k].N += t.N
		}
		c.watermark = to
	}
	rows, err := c.Source.Backlog(ctx, now)
	if err != nil {
		return err
	}
	c.backlog = rows
	return nil
}

func (c *Collector) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}
