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
func loadStripeEnv(sc *StripeConfig, getenv func(string) string) error {
	*sc = StripeConfig{APIKey: getenv("STRIPE_API_KEY"), APIBase: getenv("STRIPE_API_BASE"),
		WebhookSecret: getenv("STRIPE_WEBHOOK_SECRET"), ConnectWebhookSecret: getenv("STRIPE_CONNECT_WEBHOOK_SECRET"),
		TenantKey: getenv("SETTLE_STRIPE_TENANT_KEY")}
	switch v := getenv("SETTLE_STRIPE_TENANT_CHECK"); v {
	case "", "on":
	case "off":
		sc.AnyTenantsPayments = true
	default:
		return usagef("SETTLE_STRIPE_TENANT_CHECK=%q: use on or off", v)
	}
	if k := sc.TenantKey; k != "" && (len(k) > 40 || strings.ContainsAny(k, "[] \t\n")) {
		return usagef("SETTLE_STRIPE_TENANT_KEY=%q is not a Stripe metadata key (at most 40 characters, no brackets or spaces)", k)
	}
	var err error
	if sc.Timeout, err = durationEnv(getenv, "SETTLE_STRIPE_TIMEOUT", 8*time.Second); err != nil {
		return err
	}
	if sc.Deadline, err = durationEnv(getenv, "SETTLE_REFUND_DEADLINE", 25*time.Second); err != nil {
		return err
	}
	switch {
	case sc.Deadline > maxRefundDeadline:
		return usagef("SETTLE_REFUND_DEADLINE=%s is longer than a client's 60 s request timeout allows; use at most %s", sc.Deadline, maxRefundDeadline)
	case sc.Timeout > sc.Deadline:
		return usagef("SETTLE_STRIPE_TIMEOUT=%s is longer than SETTLE_REFUND_DEADLINE=%s; one attempt must fit in a call", sc.Timeout, sc.Deadline)
	}
	if err := loadStripeReads(sc, getenv); err != nil {
		return err
	}
	return checkHTTPURL("STRIPE_API_BASE", sc.APIBase)
}

// loadStripeReads reads the Stripe read caps: a process's, and one tenant's share, which
// cannot be more than the process's.
func loadStripeReads(sc *StripeConfig, getenv func(string) string) error {
	var err error
	if sc.ReadsPerSecond, err = rateEnv(getenv, "SETTLE_STRIPE_READS_PER_SECOND", defaultStripeReads); err != nil {
		return err
	}
	if sc.TenantReadsPerSecond, err = rateEnv(getenv, "SETTLE_STRIPE_TENANT_READS_PER_SECOND", sc.ReadsPerSecond/2); err != nil {
		return err
	}
	if sc.TenantReadsPerSecond > sc.ReadsPerSecond {
		return usagef("SETTLE_STRIPE_TENANT_READS_PER_SECOND=%g is more than SETTLE_STRIPE_READS_PER_SECOND=%g; one tenant's share cannot exceed the whole",
			sc.TenantReadsPerSecond, sc.ReadsPerSecond)
	}
	return nil
}
