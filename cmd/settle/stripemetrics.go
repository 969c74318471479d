package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/settle-dev/settle/ops/stripe"
)

// stripeReadsCollector exports the Stripe adapter's read counts on /metrics, so that an
// operator sees when the read caps (SETTLE_STRIPE_READS_PER_SECOND and the tenant's share)
// hold refunds, lookups and the reconciler back.
type stripeReadsCollector struct {
	adapter                *stripe.Adapter
	reads, refused, waited *prometheus.Desc
}

func newStripeReadsCollector(a *stripe.Adapter) *stripeReadsCollector {
	return &stripeReadsCollector{adapter: a,
		reads: prometheus.NewDesc("settle_stripe_reads_total",
			"Reads sent to Stripe by this process: payment checks, lookups, listings.", nil, nil),
		refused: prometheus.NewDesc("settle_stripe_reads_refused_total",
			"Reads the read caps refused because waiting would outlast the call, by the cap that refused (tenant: one tenant's share; account: the whole).",
			[]string{"cap"}, nil),
		waited: prometheus.NewDesc("settle_stripe_read_wait_seconds_total",
			"Time reads spent waiting on the read caps before going to Stripe.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stripeReadsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.reads
	ch <- c.refused
	ch <- c.waited
}

// Collect implements prometheus.Collector.
func (c *stripeReadsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.adapter.ReadStats()
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(s.Reads))
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.RefusedTenant), "tenant")
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.RefusedAccount), "account")
	ch <- prometheus.MustNewConstMetric(c.waited, prometheus.CounterValue, s.Waited.Seconds())
}
