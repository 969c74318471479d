package main

import (
	"strings"
	"time"

	"github.com/settle-dev/settle/ops/stripe"
)

// StripeConfig is how Settle reaches Stripe.
type StripeConfig struct {
	APIKey        string
	APIBase       string
	WebhookSecret string
	// ConnectWebhookSecret signs the Connect endpoint's events (connected accounts').
	ConnectWebhookSecret string
	// Timeout bounds one HTTP attempt; Deadline bounds one refund call, all attempts and
	// backoff included. Deadline must fit in the caller's own request timeout.
	Timeout  time.Duration
	Deadline time.Duration
	// TenantKey is the payment metadata key naming a payment's tenant; AnyTenantsPayments
	// (SETTLE_STRIPE_TENANT_CHECK=off) lets any tenant refund any payment, for a single
	// tenant install.
	TenantKey          string
	AnyTenantsPayments bool
	// ReadsPerSecond caps this process's reads at Stripe (payment checks, lookups, the
	// reconciler's listings); TenantReadsPerSecond caps one tenant's share of them.
	ReadsPerSecond, TenantReadsPerSecond float64
}

// Stripe's read caps unless set: 20 reads/s for the process, half of that for one tenant.
const defaultStripeReads = 20

// adapter is the one Stripe adapter of a command: refunds, lookups, webhooks and the
// reconciler share it, and so share its read limit.
func (sc StripeConfig) adapter(accounts stripe.Accounts) *stripe.Adapter {
	return stripe.New(stripe.Config{APIKey: sc.APIKey, BaseURL: sc.APIBase, AttemptTimeout: sc.Timeout,
		WebhookSecret: sc.WebhookSecret, ConnectWebhookSecret: sc.ConnectWebhookSecret,
		ReadsPerSecond: sc.ReadsPerSecond, TenantReadsPerSecond: sc.TenantReadsPerSecond, Accounts: accounts})
}

// maxRefundDeadline keeps a refund call inside the 60 s request timeout most clients and
// proxies use, with room to answer.
const maxRefundDeadline = 55 * time.Second

// loadStripeEnv reads how serve, demo, mcp and reconcile reach Stripe: the key and base URL,
// the webhook secrets, the tenant check and the timeouts, each checked.
func loadStripeEnv(sc *StripeConfig, e environ) error {
	*sc = StripeConfig{APIKey: e.get(envStripeAPIKey), APIBase: e.get(envStripeAPIBase),
		WebhookSecret: e.get(envStripeWebhookSecret), ConnectWebhookSecret: e.get(envStripeConnectWebhookSecret),
		TenantKey: e.get(envStripeTenantKey)}
	switch v := e.get(envStripeTenantCheck); v {
	case "", "on":
	case "off":
		sc.AnyTenantsPayments = true
	default:
		return usagef("%s=%q: use on or off", envStripeTenantCheck.Name, v)
	}
	if k := sc.TenantKey; k != "" && (len(k) > 40 || strings.ContainsAny(k, "[] \t\n")) {
		return usagef("%s=%q is not a Stripe metadata key (at most 40 characters, no brackets or spaces)", envStripeTenantKey.Name, k)
	}
	var err error
	if sc.Timeout, err = e.duration(envStripeTimeout, 8*time.Second); err != nil {
		return err
	}
	if sc.Deadline, err = e.duration(envRefundDeadline, 25*time.Second); err != nil {
		return err
	}
	switch {
	case sc.Deadline > maxRefundDeadline:
		return usagef("%s=%s is longer than a client's 60 s request timeout allows; use at most %s", envRefundDeadline.Name, sc.Deadline, maxRefundDeadline)
	case sc.Timeout > sc.Deadline:
		return usagef("%s=%s is longer than %s=%s; one attempt must fit in a call", envStripeTimeout.Name, sc.Timeout, envRefundDeadline.Name, sc.Deadline)
	}
	if err := loadStripeReads(sc, e); err != nil {
		return err
	}
	return checkHTTPURL(envStripeAPIBase, sc.APIBase)
}

// loadStripeReads reads the Stripe read caps: a process's, and one tenant's share, which
// cannot be more than the process's.
func loadStripeReads(sc *StripeConfig, e environ) error {
	var err error
	if sc.ReadsPerSecond, err = e.rate(envStripeReads, defaultStripeReads); err != nil {
		return err
	}
	if sc.TenantReadsPerSecond, err = e.rate(envStripeTenantReads, sc.ReadsPerSecond/2); err != nil {
		return err
	}
	if sc.TenantReadsPerSecond > sc.ReadsPerSecond {
		return usagef("%s=%g is more than %s=%g; one tenant's share cannot exceed the whole",
			envStripeTenantReads.Name, sc.TenantReadsPerSecond, envStripeReads.Name, sc.ReadsPerSecond)
	}
	return nil
}
