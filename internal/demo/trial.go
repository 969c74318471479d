package demo

import (
	"context"
	"fmt"
	"time"
)

// TrialTenant is the demo's second tenant, on a trial: its LLM budget a UTC day is a cent
// (trialBudgetMicros), which its small chat backend spends within a few messages: they name
// no output cap on a dear model, so each is sent with the largest cap what is left pays for
// (Settle-Output-Cap), and each holds its worst case while it runs, so the spend comes near
// the budget rather than past it. Once what is left pays for none of its messages, every
// call is refused with 429 llm_budget_too_small until midnight UTC, recorded as the
// tenant's refused request, and /tenants shows it refused.
const TrialTenant = "demo-trial"

// trialBudgetMicros is the trial tenant's LLM budget a UTC day: 0.01 in the price table's
// currency.
const trialBudgetMicros = 10_000

// trialEvery is how often the trial tenant's chat backend sends a message.
const trialEvery = 3 * time.Second

// trial plays the trial tenant's chat backend until ctx ends: one message every trialEvery.
func (d *Traffic) trial(ctx context.Context) {
	tick := time.NewTicker(trialEvery)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := d.TrialMessage(ctx, n); err != nil {
			d.log.Warn("demo trial tenant", "err", err)
			return
		}
	}
}

// TrialMessage sends the trial tenant's chat message n, a chat completion on a larger model
// with a key of its own, through a token of the trial tenant's, made (with the tenant and its
// budget, when new) on the first message. It is not safe for concurrent use.
func (d *Traffic) TrialMessage(ctx context.Context, n int) error {
	if d.trialToken == "" {
		_, token, err := budgetedTenant(ctx, d.srv.DB, TrialTenant, trialBudgetMicros)
		if err != nil {
			return err
		}
		d.trialToken = token
	}
	trial := &Traffic{srv: d.srv, fakes: d.fakes, token: d.trialToken, log: d.log}
	body := map[string]any{"model": "gpt-4o", "messages": []map[string]string{
		{"role": "user", "content": fmt.Sprintf("Write a long product description for item %d.", n)}}}
	trial.Send(ctx, "/v1/chat/completions", fmt.Sprintf("trial-%d-%d", time.Now().UnixNano(), n), "trial-chat", body, false)
	return nil
}
