package web

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// MetricBudgetRefused counts the LLM calls refused because their tenant's budget of the day
// was spent: for that tenant's customers an outage until midnight UTC.
const MetricBudgetRefused = "settle_llm_budget_refused_total"

// MetricBudgetTooSmall counts the LLM calls refused because what is left of their tenant's
// budget of the day cannot pay for their worst case: a tenant whose every call asks more
// than is left is as stopped as one whose budget is spent. It is a series of its own, not a
// reason label on MetricBudgetRefused, so that the sums people already take of that counter
// keep counting spent budgets alone.
const MetricBudgetTooSmall = "settle_llm_budget_too_small_total"

// MetricBudgetOverWhole counts the pipeline jobs refused at submission, or failed by their
// worker, because their generation may cost more than their tenant's whole budget of a day:
// no day pays for them. A series of its own, as MetricBudgetTooSmall is: its refusals are
// jobs stopped for good, not calls stopped until midnight, and the sums taken of the other
// two keep their meaning.
const MetricBudgetOverWhole = "settle_llm_budget_over_whole_total"

// budgetRefusals are the gateway's (and the job workers sharing its budgets) counts of
// calls refused by a budget, spent or too small for them.
type budgetRefusals interface {
	BudgetRefusals() []llm.BudgetRefusal
}

// tenantLister lists the tenants, to name the tenants the refusals count by id.
type tenantLister interface {
	Tenants(ctx context.Context) ([]*ops.Tenant, error)
}

// budgetNamesTTL is how long the collector trusts the tenants' names it listed: a name
// changed in the database shows within it, as the ledger's metrics read theirs at each
// evaluation, without a statement on every scrape.
const budgetNamesTTL = time.Minute

// budgetRefusedCollector exports the refusals by tenant name, API and caller. The tenant
// label takes only the names of tenants with a budget that refused a call, so no more values
// than there are tenants, as on the ledger's metrics.
type budgetRefusedCollector struct {
	src     budgetRefusals
	tenants tenantLister
	// descs are the series by the refusal's reason.
	descs map[string]*prometheus.Desc
	clock ops.Clock

	mu       sync.Mutex
	names    map[int64]string
	listedAt time.Time // when names were listed; zero before the first list
}

// registerBudgetMetrics exports the gateway's budget refusals when it counts them, or else
// those of the jobs service (a server with no LLM provider still refuses the jobs no day of
// their budget pays for). A process gives both the same budgets, so the gateway's count
// holds the service's.
func (s *Server) registerBudgetMetrics() {
	if src, ok := s.LLM.(budgetRefusals); ok {
		s.registerBudgetRefusals(src)
	} else if src, ok := s.Jobs.(budgetRefusals); ok {
		s.registerBudgetRefusals(src)
	}
}

// budgetsRefusals are the refusals a process's budgets counted, where no gateway holds them
// (a 'settle worker' process's job workers).
type budgetsRefusals struct{ b *llm.Budgets }

func (r budgetsRefusals) BudgetRefusals() []llm.BudgetRefusal { return r.b.Refusals() }

// registerBudgetRefusals exports the refusals src counts, naming tenants from s.DB.
func (s *Server) registerBudgetRefusals(src budgetRefusals) {
	lister, _ := s.DB.(tenantLister)
	labels := []string{"tenant", "api", "caller"}
	callers := " by tenant, API and caller (gateway: a client's call or resend; job: a job held back until the budget resets, once per job)."
	register(s.Registry, &budgetRefusedCollector{src: src, tenants: lister, names: map[int64]string{}, clock: s.Clock,
		descs: map[string]*prometheus.Desc{
			llm.ReasonBudgetSpent: prometheus.NewDesc(MetricBudgetRefused,
				"LLM calls refused with 429 tenant_budget_spent because their tenant's budget of the UTC day was spent,"+callers, labels, nil),
			llm.ReasonBudgetTooSmall: prometheus.NewDesc(MetricBudgetTooSmall,
				"LLM calls refused with 429 llm_budget_too_small because what is left of their tenant's budget of the UTC day "+
					"cannot pay for their worst case,"+callers, labels, nil),
			llm.ReasonOverWholeBudget: prometheus.NewDesc(MetricBudgetOverWhole,
				"Pipeline jobs refused with 422 over_whole_llm_budget at submission, or failed so by their worker, because their "+
					"generation may cost more than their tenant's whole budget of a UTC day, by tenant, API and caller (job).", labels, nil),
		}})
}

// Describe implements prometheus.Collector.
func (c *budgetRefusedCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *budgetRefusedCollector) Collect(ch chan<- prometheus.Metric) {
	rs := c.src.BudgetRefusals()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rs {
		if d := c.descs[r.Reason]; d != nil {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(r.N), c.name(r.TenantID), r.API, r.Caller)
		}
	}
}

// name is the tenant's name, listed again when a tenant not yet named refused a call or the
// list is budgetNamesTTL old; a tenant the list does not name (the read failed) is labelled
// by its id until it does.
func (c *budgetRefusedCollector) name(id int64) string {
	now := c.clock.Now()
	if n, ok := c.names[id]; ok && now.Sub(c.listedAt) < budgetNamesTTL && !now.Before(c.listedAt) {
		return n
	}
	if c.tenants != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ts, err := c.tenants.Tenants(ctx)
		cancel()
		if err == nil {
			c.names, c.listedAt = make(map[int64]string, len(ts)), now
			for _, t := range ts {
				c.names[t.ID] = t.Name
			}
		}
	}
	if n, ok := c.names[id]; ok {
		return n
	}
	return "#" + strconv.FormatInt(id, 10)
}
