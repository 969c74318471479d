package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/web"
)

// wireLLM builds the gateway of POST /v1/chat/completions, /v1/responses and /v1/embeddings
// when a provider is configured, and returns the provider's usage report for the reconciler
// (nil without a provider).
func (p *Program) wireLLM(srv *web.Server) (recon.UsageSource, error) {
	c := p.Config.LLM
	if c.BaseURL == "" {
		return nil, nil
	}
	up, prices, err := c.upstream()
	if err != nil {
		return nil, err
	}
	modes := map[string]llm.Mode{}
	for tenant, pol := range c.TenantPolicies {
		modes[tenant] = llm.Mode(pol)
	}
	scopes := map[string]llm.KeyScope{}
	for tenant, s := range c.TenantKeyScopes {
		scopes[tenant] = llm.KeyScope(s)
	}
	gw, err := llm.New(llm.Config{Ledger: p.Ledger, Upstream: up, Prices: prices, KeyTTL: c.KeyTTL,
		Mode: llm.Mode(c.Policy), TenantModes: modes, KeyScope: llm.KeyScope(c.KeyScope), TenantKeyScopes: scopes,
		Deadline: c.Deadline, MaxWait: c.MaxWait, Logger: p.Logger,
		Stored: up, Reconciled: p.Config.Reconcile.Interval > 0, Refs: p.DB})
	if err != nil {
		return nil, err
	}
	srv.LLM = gw
	p.gateway = gw
	name := c.ProviderName
	if name == "" {
		name = "openai"
	}
	// Lookups in the provider's stored completions: from the dashboard, and by the
	// reconciler before it reads the usage report.
	lookups := &llm.Lookups{Ledger: p.Ledger, Events: p.DB, Store: up, Prices: prices}
	if d, ok := srv.Desk.(*desk.Desk); ok {
		d.Completions, d.Findings = lookups, p.DB
	}
	// The usage report sits beside the API: {base}/usage for an OpenAI-style ".../v1" base.
	return &openai.UsageReader{Provider: name, BaseURL: strings.TrimSuffix(strings.TrimSuffix(c.BaseURL, "/"), "/v1"), APIKey: c.APIKey,
		Lookups: lookups}, nil
}

// upstream builds the client of the configured provider and the prices its calls cost, as
// the gateway and the job workers both call it.
func (c LLMConfig) upstream() (*openai.Client, *llm.PriceTable, error) {
	up, err := openai.New(openai.Config{Name: c.ProviderName, BaseURL: c.BaseURL, APIKey: c.APIKey, AttemptTimeout: c.AttemptTimeout,
		Store: openai.StoreMode(c.Store)})
	if err != nil {
		return nil, nil, err
	}
	prices := llm.DefaultPrices()
	if c.Prices != "" {
		if prices, err = llm.LoadPrices(c.Prices); err != nil {
			return nil, nil, err
		}
	}
	return up, prices, nil
}

// fakeLLM serves the stateful fake LLM provider until ctx ends.
func fakeLLM(ctx context.Context, cfg Config, logger *slog.Logger, stdout io.Writer) error {
	faults, err := fake.ParseLLMFaults(cfg.FakeLLM.Faults)
	if err != nil {
		return usagef("fake llm: --faults: %v", err)
	}
	f := fake.NewLLM(fake.LLMOptions{Seed: cfg.FakeLLM.Seed, Latency: cfg.FakeLLM.Latency, ChunkDelay: cfg.FakeLLM.ChunkDelay, Logger: logger})
	for _, x := range faults {
		f.AddFault(x)
	}
	base, err := f.Start(cfg.FakeLLM.Addr)
	if err != nil {
		return fmt.Errorf("fake llm: %w", err)
	}
	defer f.Close()
	fmt.Fprintf(stdout, "fake LLM at %s (generations: %s/../_fake/llm/generations, usage: %s/usage)\n", base, base, base)
	<-ctx.Done()
	return nil
}
