package alerts_test

import "testing"

// Under Prometheus, LLMDoubleBillingSuspected covers Anthropic's Messages API as it covers
// OpenAI's: a tenant half of whose messages attempts are resends after uncertain sends (a
// stream Anthropic cut, sent again under the interactive policy) gets the page and the
// ticket with api="messages" and provider="anthropic".
func TestDoubleBillingRuleCoversMessagesUnderPromtool(t *testing.T) {
	promtoolTest(t, `
tests:
  - interval: 1m
    input_series:
      - series: 'settle_attempts_total{tenant="shop",kind="llm_call",provider="anthropic",outcome="ok",api="messages",instance="a"}'
        values: '0+10x90'
      - series: 'settle_llm_possible_duplicate_attempts_total{tenant="shop",kind="llm_call",provider="anthropic",api="messages",instance="a"}'
        values: '0+5x90'
    alert_rule_test:
      - eval_time: 80m
        alertname: LLMDoubleBillingSuspected
        exp_alerts:
          - exp_labels: {severity: page, tenant: shop, kind: llm_call, provider: anthropic, api: messages}
            exp_annotations:
              summary: "50% of llm_call attempts on messages at anthropic for shop are resends that may be billed twice"
              description: "LLM attempts of shop on messages time out and are sent again far more than usual over both the last hour and the last 5 minutes; each resend may be a second generation the provider bills."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#llmdoublebillingsuspected"
          - exp_labels: {severity: ticket, tenant: shop, kind: llm_call, provider: anthropic, api: messages}
            exp_annotations:
              summary: "50% of llm_call attempts on messages at anthropic for shop are possible double billing over 6h"
              description: "A slow, steady excess of LLM resends after uncertain sends."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#llmdoublebillingsuspected"
`)
}
