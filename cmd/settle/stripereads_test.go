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
	db := "postgres://u@127.0.0.1:1/x"
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"SETTLE_STRIPE_READS_PER_SECOND": "fast"}, `SETTLE_STRIPE_READS_PER_SECOND="fast" is not a positive number`},
		{map[string]string{"SETTLE_STRIPE_READS_PER_SECOND": "0"}, "SETTLE_STRIPE_READS_PER_SECOND"},
		{map[string]string{"SETTLE_STRIPE_READS_PER_SECOND": "-5"}, "SETTLE_STRIPE_READS_PER_SECOND"},
		{map[string]string{"SETTLE_STRIPE_READS_PER_SECOND": "NaN"}, "SETTLE_STRIPE_READS_PER_SECOND"},
		{map[string]string{"SETTLE_STRIPE_TENANT_READS_PER_SECOND": "+Inf"}, "SETTLE_STRIPE_TENANT_READS_PER_SECOND"},
		{map[string]string{"SETTLE_STRIPE_READS_PER_SECOND": "10", "SETTLE_STRIPE_TENANT_READS_PER_SECOND": "12"},
			"SETTLE_STRIPE_TENANT_READS_PER_SECOND=12 is more than SETTLE_STRIPE_READS_PER_SECOND=10"},
		{map[string]string{"SETTLE_STRIPE_TENANT_READS_PER_SECOND": "25"}, "is more than SETTLE_STRIPE_READS_PER_SECOND=20"},
	} {
		c.vars["DATABASE_URL"] = db
		code, _, stderr := run(t, []string{"serve"}, c.vars, "")
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", c.vars, code, stderr, c.want)
		}
	}

	env := map[string]string{"DATABASE_URL": db, "STRIPE_API_KEY": "sk_test_reads"}
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
	st := fake.NewStripe(fake.StripeOptions{})
	base, err := st.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	st.AddPaymentIntent("pi_reads", 5000, "usd")
	env["STRIPE_API_BASE"] = base
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
