package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/settle-dev/settle/ops/fake"
)

// fakeAnthropic serves the stateful fake Anthropic provider until ctx ends, for trying a
// Messages API client against Anthropic's failure modes without an account.
func fakeAnthropic(ctx context.Context, cfg Config, logger *slog.Logger, stdout io.Writer) error {
	c := cfg.FakeAnthropic
	if err := checkFakePace("fake anthropic", c); err != nil {
		return err
	}
	faults, err := fake.ParseLLMFaults(c.Faults)
	if err != nil {
		return usagef("fake anthropic: --faults: %v", err)
	}
	a := fake.NewAnthropic(fake.AnthropicOptions{Seed: c.Seed, Latency: c.Latency, ChunkDelay: c.ChunkDelay, Logger: logger})
	for _, f := range faults {
		a.AddFault(f)
	}
	base, err := a.Start(c.Addr)
	if err != nil {
		return fmt.Errorf("fake anthropic: %w", err)
	}
	defer a.Close()
	fmt.Fprintf(stdout, "fake Anthropic at %s (generations: %s/_fake/anthropic/generations, usage report: %s/v1/organizations/usage_report/messages with an sk-ant-admin key)\n", base, base, base)
	<-ctx.Done()
	return nil
}
