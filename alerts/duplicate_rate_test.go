package alerts_test

import "testing"

// Under Prometheus, DuplicateRequestRateHigh measures the duplicates against the admitted
// requests (ops rule 8): a tenant whose clients repeat one refund in six pages and opens a
// ticket, though as many again of its requests were refused at the door and cancels were
// answered. Against all its requests the rate would be 4 %, under both burn rates, and
// nobody would hear of a client retrying in a loop.
func TestDuplicateRuleCountsTheAdmittedRequestsUnderPromtool(t *testing.T) {
	promtoolTest(t, `
tests:
  - interval: 1m
    input_series:
      - series: 'settle_client_requests_total{tenant="shop",kind="refund",provider="stripe",answer="new",duplicate="false",api="",instance="a"}'
        values: '0+10x90'
      - series: 'settle_client_requests_total{tenant="shop",kind="refund",provider="stripe",answer="replayed",duplicate="true",api="",instance="a"}'
        values: '0+2x90'
      - series: 'settle_client_requests_total{tenant="shop",kind="refund",provider="",answer="rejected",duplicate="false",api="",instance="a"}'
        values: '0+30x90'
      - series: 'settle_client_requests_total{tenant="shop",kind="llm_call",provider="openai",answer="cancelled",duplicate="false",api="responses",instance="a"}'
        values: '0+8x90'
      - series: 'settle_client_requests_total{tenant="shop",kind="refund",provider="",answer="cancel_refused",duplicate="false",api="",instance="a"}'
        values: '0+8x90'
    alert_rule_test:
      - eval_time: 80m
        alertname: DuplicateRequestRateHigh
        exp_alerts:
          - exp_labels: {severity: page, tenant: shop, kind: refund}
            exp_annotations:
              summary: "Duplicate requests are 16.67% of the admitted refund requests for shop"
              description: "Clients of shop repeat refund requests far more than usual over both the last hour and the last 5 minutes. Settle absorbs them, but a client is retrying in a loop."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#duplicaterequestratehigh"
          - exp_labels: {severity: ticket, tenant: shop, kind: refund}
            exp_annotations:
              summary: "Duplicate requests are 16.67% of the admitted refund requests for shop over 6h"
              description: "A slow, steady excess of repeated requests from shop."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#duplicaterequestratehigh"
`)
}
