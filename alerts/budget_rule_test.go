package alerts_test

import "testing"

// TestTheBudgetRuleUnderPromtool holds the built-in rule for a tenant whose LLM budget stops
// its calls, as exported for Prometheus: it fires for the tenant whose calls and jobs are
// refused for its spent budget (the ledger's count of refused requests by reason, which every
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
          - exp_labels: {severity: warning, reason: tenant_budget_spent, tenant: shop}
            exp_annotations:
              summary: "shop's LLM budget of the day is spent: 30 calls refused in the last 10 minutes"
              description: "Every paid LLM call of shop is refused with 429 tenant_budget_spent, and its jobs wait, until midnight UTC."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#tenantllmbudgetspent"
      - eval_time: 49m
        alertname: TenantLLMBudgetSpent
        exp_alerts:
          - exp_labels: {severity: warning, reason: tenant_budget_spent, tenant: shop}
            exp_annotations:
              summary: "shop's LLM budget of the day is spent: 3 calls refused in the last 10 minutes"
              description: "Every paid LLM call of shop is refused with 429 tenant_budget_spent, and its jobs wait, until midnight UTC."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#tenantllmbudgetspent"
      - eval_time: 51m
        alertname: TenantLLMBudgetSpent
        exp_alerts: []
`)
}

// TestTheTooSmallBudgetRuleUnderPromtool holds the exported rule for a tenant stopped by what
// is left of its LLM budget: shop, whose every call is refused with llm_budget_too_small, is
// told of (reason llm_budget_too_small, by kind, saying what is left is too small for its
// calls); bank, a third of whose requests are refused so, and cafe, which sent one oversize
// call and then calls that went through, page nobody, not even in the minute when its one
// refused request was all it had sent (fewer than 3 requests in the window stay quiet); the
// alert keeps firing 10 minutes after shop's refusals last filled its 2-minute window, and
// then resolves. The counts are the ledger's, which every replica exports alike.
// ops rule 8
func TestTheTooSmallBudgetRuleUnderPromtool(t *testing.T) {
	promtoolTest(t, `
tests:
  - interval: 1m
    input_series:
      - series: 'settle_client_requests_total{tenant="shop",kind="llm_call",provider="",answer="rejected",duplicate="false",api="",reason="llm_budget_too_small",instance="a"}'
        values: '0+2x30 60x40'
      - series: 'settle_client_requests_total{tenant="shop",kind="llm_call",provider="",answer="rejected",duplicate="false",api="",reason="llm_budget_too_small",instance="b"}'
        values: '0+2x30 60x40'
      - series: 'settle_client_requests_total{tenant="bank",kind="llm_call",provider="",answer="rejected",duplicate="false",api="",reason="llm_budget_too_small",instance="a"}'
        values: '0+1x70'
      - series: 'settle_client_requests_total{tenant="bank",kind="llm_call",provider="fake-llm",answer="new",duplicate="false",api="chat_completions",reason="",instance="a"}'
        values: '0+2x70'
      - series: 'settle_client_requests_total{tenant="cafe",kind="llm_call",provider="",answer="rejected",duplicate="false",api="",reason="llm_budget_too_small",instance="a"}'
        values: '0x4 1x65'
      - series: 'settle_client_requests_total{tenant="cafe",kind="llm_call",provider="fake-llm",answer="new",duplicate="false",api="chat_completions",reason="",instance="a"}'
        values: '0x4 0+1x65'
    alert_rule_test:
      - eval_time: 5m
        alertname: TenantLLMBudgetSpent
        exp_alerts:
          - exp_labels: {severity: warning, reason: llm_budget_too_small, tenant: shop, kind: llm_call}
            exp_annotations:
              summary: "What is left of shop's LLM budget of the day is too small for the calls it makes: 100% of its llm_call requests refused in the last 2 minutes"
              description: "shop's llm_call requests each may cost more than is left of its budget, and are refused with 429 llm_budget_too_small until midnight UTC unless they ask for fewer tokens: raise the budget, or have the client lower its max tokens."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#tenantllmbudgetspent"
      - eval_time: 40m
        alertname: TenantLLMBudgetSpent
        exp_alerts:
          - exp_labels: {severity: warning, reason: llm_budget_too_small, tenant: shop, kind: llm_call}
            exp_annotations:
              summary: "What is left of shop's LLM budget of the day is too small for the calls it makes: 100% of its llm_call requests refused in the last 2 minutes"
              description: "shop's llm_call requests each may cost more than is left of its budget, and are refused with 429 llm_budget_too_small until midnight UTC unless they ask for fewer tokens: raise the budget, or have the client lower its max tokens."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#tenantllmbudgetspent"
      - eval_time: 43m
        alertname: TenantLLMBudgetSpent
        exp_alerts: []
`)
}

// TestABusyTenantStoppedByWhatIsLeftIsToldWithinTwoMinutesUnderPromtool is the attack of a
// tenant whose client made 10 calls a second for nine minutes and whose every call is refused
// with llm_budget_too_small from then on: over a ten-minute window its refusals stayed under
// half of its requests for minutes of a stop its customers already saw. The exported rule
// fires for shop two minutes after its stop, as the built-in one does, while cafe, as busy,
// whose one oversize call among calls that go through is refused, pages nobody.
// ops rule 8
func TestABusyTenantStoppedByWhatIsLeftIsToldWithinTwoMinutesUnderPromtool(t *testing.T) {
	promtoolTest(t, `
tests:
  - interval: 1m
    input_series:
      - series: 'settle_client_requests_total{tenant="shop",kind="llm_call",provider="fake-llm",answer="new",duplicate="false",api="chat_completions",reason="",instance="a"}'
        values: '0+600x9 5400x10'
      - series: 'settle_client_requests_total{tenant="shop",kind="llm_call",provider="",answer="rejected",duplicate="false",api="",reason="llm_budget_too_small",instance="a"}'
        values: '0x9 600+600x9'
      - series: 'settle_client_requests_total{tenant="cafe",kind="llm_call",provider="fake-llm",answer="new",duplicate="false",api="chat_completions",reason="",instance="a"}'
        values: '0+600x19'
      - series: 'settle_client_requests_total{tenant="cafe",kind="llm_call",provider="",answer="rejected",duplicate="false",api="",reason="llm_budget_too_small",instance="a"}'
        values: '0x9 1x10'
    alert_rule_test:
      - eval_time: 11m
        alertname: TenantLLMBudgetSpent
        exp_alerts:
          - exp_labels: {severity: warning, reason: llm_budget_too_small, tenant: shop, kind: llm_call}
            exp_annotations:
              summary: "What is left of shop's LLM budget of the day is too small for the calls it makes: 100% of its llm_call requests refused in the last 2 minutes"
              description: "shop's llm_call requests each may cost more than is left of its budget, and are refused with 429 llm_budget_too_small until midnight UTC unless they ask for fewer tokens: raise the budget, or have the client lower its max tokens."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#tenantllmbudgetspent"
      - eval_time: 15m
        alertname: TenantLLMBudgetSpent
        exp_alerts:
          - exp_labels: {severity: warning, reason: llm_budget_too_small, tenant: shop, kind: llm_call}
            exp_annotations:
              summary: "What is left of shop's LLM budget of the day is too small for the calls it makes: 100% of its llm_call requests refused in the last 2 minutes"
              description: "shop's llm_call requests each may cost more than is left of its budget, and are refused with 429 llm_budget_too_small until midnight UTC unless they ask for fewer tokens: raise the budget, or have the client lower its max tokens."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#tenantllmbudgetspent"
`)
}
