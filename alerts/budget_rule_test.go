package alerts_test

import "testing"

// TestTheBudgetRuleUnderPromtool holds the built-in rule for a tenant whose LLM budget stops
// its calls, as exported for Prometheus: it fires for the tenant whose calls and jobs are
// refused for its budget (the ledger's count of refused requests by reason, which every
// replica exports alike, so each series is counted once however many replicas are scraped),
// says nothing of a tenant refused for another reason or earlier and no more, and resolves
// 20 minutes after the last refusal (10 minutes of window, 10 of keep_firing_for).
// ops rule 8
func TestTheBudgetRuleUnderPromtool(t *testing.T) {
	promtoolTest(t, `
tests:
  - interval: 1m
    input_series:
      - series: 'settle_client_requests_total{tenant="shop",kind="llm_call",provider="",answer="rejected",duplicate="false",api="",reason="tenant_budget_spent",instance="a"}'
        values: '0+2x30 60x40'
      - series: 'settle_client_requests_total{tenant="shop",kind="llm_call",provider="",answer="rejected",duplicate="false",api="",reason="tenant_budget_spent",instance="b"}'
        values: '0+2x30 60x40'
      - series: 'settle_client_requests_total{tenant="shop",kind="llm_job",provider="",answer="rejected",duplicate="false",api="",reason="tenant_budget_spent",instance="a"}'
        values: '0+1x30 30x40'
      - series: 'settle_client_requests_total{tenant="shop",kind="llm_call",provider="openai",answer="new",duplicate="false",api="chat_completions",reason="",instance="a"}'
        values: '0+5x70'
      - series: 'settle_client_requests_total{tenant="bank",kind="llm_call",provider="",answer="rejected",duplicate="false",api="",reason="model_not_priced",instance="a"}'
        values: '0+3x70'
      - series: 'settle_client_requests_total{tenant="old",kind="llm_call",provider="",answer="rejected",duplicate="false",api="",reason="tenant_budget_spent",instance="a"}'
        values: '5x70'
    alert_rule_test:
      - eval_time: 15m
        alertname: TenantLLMBudgetSpent
        exp_alerts:
          - exp_labels: {severity: warning, tenant: shop}
            exp_annotations:
              summary: "shop's LLM budget of the day is spent: 30 calls refused in the last 10 minutes"
              description: "Every paid LLM call of shop is refused with 429 tenant_budget_spent, and its jobs wait, until midnight UTC."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#tenantllmbudgetspent"
      - eval_time: 49m
        alertname: TenantLLMBudgetSpent
        exp_alerts:
          - exp_labels: {severity: warning, tenant: shop}
            exp_annotations:
              summary: "shop's LLM budget of the day is spent: 3 calls refused in the last 10 minutes"
              description: "Every paid LLM call of shop is refused with 429 tenant_budget_spent, and its jobs wait, until midnight UTC."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#tenantllmbudgetspent"
      - eval_time: 51m
        alertname: TenantLLMBudgetSpent
        exp_alerts: []
`)
}
