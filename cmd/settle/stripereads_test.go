package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/fake"
)

// TestStripeReadCapsAreConfigured: the read caps a user sets reach the adapter every
// command builds; a bad value is one line and starts nothing.
func TestStripeReadCapsAreConfigured(t *testing.T) {
	t.Parallel()
	wantServeRefused(t, []refusedEnv{
		{map[string]string{"SETTLE_STRIPE_READS_PER_SECOND": "fast"}, `SETTLE_STRIPE_READS_PER_SECOND="fast" is not a positive number`},
		{map[string]string{"SETTLE_STRIPE_READS_PER_SECOND": "0"}, "SETTLE_STRIPE_READS_PER_SECOND"},
		{map[string]string{"SETTLE_STRIPE_READS_PER_SECOND": "-5"}, "SETTLE_STRIPE_READS_PER_SECOND"},
		{map[string]string{"SETTLE_STRIPE_READS_PER_SECOND": "NaN"}, "SETTLE_STRIPE_READS_PER_SECOND"},
		{map[string]string{"SETTLE_STRIPE_TENANT_READS_PER_SECOND": "+Inf"}, "SETTLE_STRIPE_TENANT_READS_PER_SECOND"},
		{map[string]string{"SETTLE_STRIPE_READS_PER_SECOND": "10", "SETTLE_STRIPE_TENANT_READS_PER_SECOND": "12"},
			"SETTLE_STRIPE_TENANT_READS_PER_SECOND=12 is more than SETTLE_STRIPE_READS_PER_SECOND=10"},
		{map[string]string{"SETTLE_STRIPE_TENANT_READS_PER_SECOND": "25"}, "is more than SETTLE_STRIPE_READS_PER_SECOND=20"},
	})

	env := map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:1/x", "STRIPE_API_KEY": "sk_test_reads"}
	cfg, err := LoadConfig([]string{"serve"}, func(k string) string { return env[k] }, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Stripe.ReadsPerSecond != 20 || cfg.Stripe.TenantReadsPerSecond != 10 {
		t.Errorf("default caps %g and %g reads/s, want 20 and 10", cfg.Stripe.ReadsPerSecond, cfg.Stripe.TenantReadsPerSecond)
	}
	env["SETTLE_STRIPE_READS_PER_SECOND"] = "300"
	if cfg, err = LoadConfig([]string{"serve"}, func(k string) string { return env[k] }, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if cfg.Stripe.TenantReadsPerSecond != 150 {
		t.Errorf("a tenant's cap is %g reads/s under a cap of 300, want half of it", cfg.Stripe.TenantReadsPerSecond)
	}

	// The configured cap is the one the adapter keeps. A payment check is two reads (the
	// payment, its refunds); at 2 reads/s with a burst of 2, two seconds of checks one after
	// another get at most six reads, three checks, however fast the machine. The default
	// cap would allow about eleven.
	env["SETTLE_STRIPE_TENANT_READS_PER_SECOND"] = "2"
	env["STRIPE_API_BASE"] = fakeStripeWith(t, "pi_reads")
	if cfg, err = LoadConfig([]string{"serve"}, func(k string) string { return env[k] }, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	a := cfg.Stripe.adapter(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	checks := 0
	for ; ; checks++ {
		if _, err := a.Payment(ctx, 7, "pi_reads"); err != nil {
			break
		}
	}
	if checks < 1 || checks > 3 {
		t.Errorf("%d payment checks in two seconds at 2 reads/s, want 1 to 3", checks)
	}
}

// TestServeCountsStripeReadsOnMetrics: serve's /metrics shows the reads its Stripe adapter
// sent and those its caps refused, so an operator sees when the caps hold refunds back.
func TestServeCountsStripeReadsOnMetrics(t *testing.T) {
	t.Parallel()
	p := serveWith(t, map[string]string{"STRIPE_API_KEY": "sk_test_metrics", "STRIPE_API_BASE": fakeStripeWith(t, "pi_metrics"),
		"SETTLE_STRIPE_TENANT_READS_PER_SECOND": "0.01", "SETTLE_RECONCILE_INTERVAL": "off"})
	if p.stripe == nil || p.Refunds == nil || p.Refunds.Provider != p.stripe {
		t.Fatal("the refund tool does not read through serve's one Stripe adapter")
	}
	// A tenant's burst is two reads: one payment check (the payment and its refunds); at
	// 0.01 reads/s the next two checks would wait 100 s for a read, far past their calls.
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.stripe.Payment(ctx, 7, "pi_metrics")
		cancel()
		if (i == 0) != (err == nil) {
			t.Fatalf("payment check %d: %v", i+1, err)
		}
	}
	_, body := getWith(t, p.URL()+"/metrics")
	for _, want := range []string{"settle_stripe_reads_total 2\n", `settle_stripe_reads_refused_total{cap="tenant"} 2` + "\n",
		`settle_stripe_reads_refused_total{cap="account"} 0` + "\n", "settle_stripe_read_wait_seconds_total "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
}

// fakeStripeWith starts a fake Stripe holding one payment of 50.00, for the test's life,
// and returns its base URL.
func fakeStripeWith(t *testing.T, paymentIntent string) string {
	t.Helper()
	st := fake.NewStripe(fake.StripeOptions{})
	base, err := st.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	st.AddPaymentIntent(paymentIntent, 5000, "usd")
	return base
}
