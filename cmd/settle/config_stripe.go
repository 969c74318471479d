package main

import (
	"net/url"
	"strings"
	"time"
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
	if b := sc.APIBase; b != "" {
		if u, err := url.Parse(b); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("STRIPE_API_BASE=%q is not an http(s) URL", b)
		}
	}
	return nil
}
