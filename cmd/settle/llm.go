package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/settle-dev/settle/ops/anthropic"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/web"
)

// wireLLM builds the gateway when a provider is configured: POST /v1/chat/completions,
// /v1/responses and /v1/embeddings with an OpenAI-compatible one, POST /v1/messages with
// Anthropic. It returns the usage reports for the reconciler: the OpenAI-compatible
// provider's, and Anthropic's when its Admin API key is set.
func (p *Program) wireLLM(srv *web.Server) ([]recon.UsageSource, error) {
	c := p.Config.LLM
	prices, err := c.prices()
	if err != nil {
		return nil, err
	}
	// The tenants page counts budgets in the currency the gateway and the job workers cost
	// calls in, the table's, with or without a provider here: a replica serving only the
	// dashboard shows the spend the others record.
	srv.LLMCurrency = prices.CurrencyOf()
	if c.BaseURL == "" && c.AnthropicBaseURL == "" {
		return nil, nil
	}
	modes := map[string]llm.Mode{}
	for tenant, pol := range c.TenantPolicies {
		modes[tenant] = llm.Mode(pol)
	}
	scopes := map[string]llm.KeyScope{}
	for tenant, s := range c.TenantKeyScopes {
		scopes[tenant] = llm.KeyScope(s)
	}
	cfg := llm.Config{Ledger: p.Ledger, Prices: prices, KeyTTL: c.KeyTTL,
		Mode: llm.Mode(c.Policy), TenantModes: modes, KeyScope: llm.KeyScope(c.KeyScope), TenantKeyScopes: scopes,
		Deadline: c.Deadline, MaxWait: c.MaxWait, Logger: p.Logger,
		Reconciled: p.Config.Reconcile.Interval > 0, Refs: p.DB, Streams: p.DB,
		Budgets: p.llmBudgets(prices)}
	var up *openai.Client
	if c.BaseURL != "" {
		if up, err = c.openAI(); err != nil {
			return nil, err
		}
		cfg.Upstream, cfg.Stored = up, up
	}
	if c.AnthropicBaseURL != "" {
		a, err := anthropic.New(anthropic.Config{BaseURL: c.AnthropicBaseURL, APIKey: c.AnthropicAPIKey, AttemptTimeout: c.AttemptTimeout})
		if err != nil {
			return nil, err
		}
		cfg.Upstreams = map[string]llm.Upstream{llm.MessagesRoute: a}
	}
	gw, err := llm.New(cfg)
	if err != nil {
		return nil, err
	}
	srv.LLM = gw
	p.gateway = gw
	usage := c.anthropicUsage()
	if up == nil {
		return usage, nil
	}
	name := c.ProviderName
	if name == "" {
		name = "openai"
	}
	// Lookups in the provider's stored completions: from the dashboard, and by the
	// reconciler before it reads the usage report.
	lookups := &llm.Lookups{Ledger: p.Ledger, Events: p.DB, Store: up, Prices: prices}
	if d, ok := srv.Desk.(*desk.Desk); ok {
		d.Completions, d.Findings = lookups, reconstore.New(p.DB)
	}
	// The usage report sits beside the API: {base}/usage for an OpenAI-style ".../v1" base.
	return append(usage, &openai.UsageReader{Provider: name, BaseURL: strings.TrimSuffix(strings.TrimSuffix(c.BaseURL, "/"), "/v1"), APIKey: c.APIKey,
		Lookups: lookups}), nil
}

// loadAnthropic reads how Anthropic is reached: SETTLE_ANTHROPIC_BASE_URL and
// SETTLE_ANTHROPIC_API_KEY for the Messages API, SETTLE_ANTHROPIC_ADMIN_KEY and
// SETTLE_ANTHROPIC_API_KEY_ID for its usage report, which is read at the same base URL.
func (l *LLMConfig) loadAnthropic(e environ) error {
	l.AnthropicBaseURL, l.AnthropicAPIKey = e.get(envAnthropicBaseURL), e.get(envAnthropicAPIKey)
	l.AnthropicAdminKey, l.AnthropicAPIKeyID = e.get(envAnthropicAdminKey), e.get(envAnthropicAPIKeyID)
	if err := checkHTTPURL(envAnthropicBaseURL, l.AnthropicBaseURL); err != nil {
		return err
	}
	if l.AnthropicAdminKey != "" && l.AnthropicBaseURL == "" {
		return usagef("%s needs %s: the usage report is read there", envAnthropicAdminKey.Name, envAnthropicBaseURL.Name)
	}
	if l.AnthropicAPIKeyID != "" && l.AnthropicAdminKey == "" {
		return usagef("%s names the key whose usage the reconciler compares; it needs %s", envAnthropicAPIKeyID.Name, envAnthropicAdminKey.Name)
	}
	return nil
}

// loadKeyScopes reads SETTLE_LLM_KEY_SCOPE: a default scope, tenant=scope pairs, or both
// ("tenant,acme=user").
func loadKeyScopes(l *LLMConfig, v string) error {
	l.KeyScope = "tenant"
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		name, scope, pair := strings.Cut(part, "=")
		if !pair {
			name, scope = "", part
		}
		switch {
		case part == "":
		case scope != "tenant" && scope != "user", pair && name == "":
			return usagef("%s: %q is not tenant, user or tenant-name=tenant|user", envLLMKeyScope.Name, part)
		case !pair:
			l.KeyScope = scope
		default:
			if l.TenantKeyScopes == nil {
				l.TenantKeyScopes = map[string]string{}
			}
			l.TenantKeyScopes[name] = scope
		}
	}
	return nil
}

// anthropicUsage is Anthropic's Messages usage report for the reconciler, read with the
// Admin API key, or none without one.
func (c LLMConfig) anthropicUsage() []recon.UsageSource {
	if c.AnthropicAdminKey == "" || c.AnthropicBaseURL == "" {
		return nil
	}
	u := &anthropic.UsageReader{BaseURL: c.AnthropicBaseURL, AdminKey: c.AnthropicAdminKey}
	if c.AnthropicAPIKeyID != "" {
		u.APIKeyIDs = []string{c.AnthropicAPIKeyID}
	}
	return []recon.UsageSource{u}
}

// upstream builds the client of the configured OpenAI-compatible provider and the prices its
// calls cost, as the gateway and the job workers both call it.
func (c LLMConfig) upstream() (*openai.Client, *llm.PriceTable, error) {
	up, err := c.openAI()
	if err != nil {
		return nil, nil, err
	}
	prices, err := c.prices()
	if err != nil {
		return nil, nil, err
	}
	return up, prices, nil
}

// openAI builds the client of the configured OpenAI-compatible provider.
func (c LLMConfig) openAI() (*openai.Client, error) {
	return openai.New(openai.Config{Name: c.ProviderName, BaseURL: c.BaseURL, APIKey: c.APIKey, AttemptTimeout: c.AttemptTimeout,
		Store: openai.StoreMode(c.Store)})
}

// prices is the price table of every call: SETTLE_LLM_PRICES, or the built-in one.
func (c LLMConfig) prices() (*llm.PriceTable, error) {
	if c.Prices == "" {
		return llm.DefaultPrices(), nil
	}
	return llm.LoadPrices(c.Prices)
}

// fakeLLM serves the stateful fake LLM provider until ctx ends.
func fakeLLM(ctx context.Context, cfg Config, logger *slog.Logger, stdout io.Writer) error {
	if err := checkFakePace("fake llm", cfg.FakeLLM); err != nil {
		return err
	}
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

// llmBudgets is the process's one cache of the tenants' LLM spends: the gateway and the job
// workers share it, so the refusals /metrics counts (settle_llm_budget_refused_total) are
// both's.
func (p *Program) llmBudgets(prices *llm.PriceTable) *llm.Budgets {
	p.budgetsOnce.Do(func() { p.budgets = llm.NewBudgets(p.DB, prices, p.Clock, 0) })
	return p.budgets
}
