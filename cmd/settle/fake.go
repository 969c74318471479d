package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/settle-dev/settle/ops/fake"
)

// fakeStripe serves the stateful fake Stripe until ctx ends, for trying Settle (or any
// stripe-go client) against Stripe's failure modes without an account.
func fakeStripe(ctx context.Context, cfg Config, logger *slog.Logger, stdout io.Writer) error {
	// The fake reads a retention of 0 or less as its default of 24 hours.
	if cfg.Fake.Retention <= 0 {
		return usagef("fake stripe: --retention %s is not a positive duration such as 24h or 10s", cfg.Fake.Retention)
	}
	faults, err := fake.ParseFaults(cfg.Fake.Faults)
	if err != nil {
		return usagef("fake stripe: --faults: %v", err)
	}
	fk := fake.NewStripe(fake.StripeOptions{Retention: cfg.Fake.Retention, WebhookURL: cfg.Fake.WebhookURL,
		WebhookSecret: cfg.Fake.WebhookSecret, Logger: logger})
	for _, f := range faults {
		fk.AddFault(f)
	}
	base, err := fk.Start(cfg.Fake.Addr)
	if err != nil {
		return fmt.Errorf("fake stripe: %w", err)
	}
	defer fk.Close()
	fmt.Fprintf(stdout, "fake Stripe at %s (ledger: %s/_fake/ledger, seed payments: POST %s/_fake/payment_intents)\n", base, base, base)
	<-ctx.Done()
	return nil
}

// checkFakePace refuses a negative --latency or --chunk-delay of 'fake llm' or 'fake
// anthropic', which the fake would take as none.
func checkFakePace(command string, c FakeLLMConfig) error {
	if c.Latency < 0 {
		return usagef("%s: --latency %s is negative; use 0 for none", command, c.Latency)
	}
	if c.ChunkDelay < 0 {
		return usagef("%s: --chunk-delay %s is negative; use 0 for none", command, c.ChunkDelay)
	}
	return nil
}
