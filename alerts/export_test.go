package alerts_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/alerts/alertstest"
)

func TestExportedRulesPassPromtool(t *testing.T) {
	promtool := alertstest.Need(t, alertstest.PromtoolBin, alertstest.PromtoolPkg)
	var buf bytes.Buffer
	if err := alerts.ExportPrometheus(alerts.DefaultRules(), &buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "settle.rules.yml")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n--- rules ---\n%s", err, out, buf.String())
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool said %s", out)
	}
	for _, want := range []string{
		`sum by (tenant, kind, provider) (max without (instance, pod) (increase(settle_attempts_total{outcome="timeout"}[5m])))`,
		`keep_firing_for: 5m`,
		`offset 1h`,
		`max by (tenant, kind) (settle_oldest_open_operation_age_seconds{status="unknown"}) > 14400`,
		// The header says how /metrics may be scraped.
		`SETTLE_METRICS_TOKEN is set (scrape with authorization: credentials_file)`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("export lacks %s", want)
		}
	}
}

// promtoolTest runs 'promtool test rules' on the exported default rules with the given test
// file body (its rule_files line is added).
func promtoolTest(t *testing.T, tests string) {
	t.Helper()
	promtool := alertstest.Need(t, alertstest.PromtoolBin, alertstest.PromtoolPkg)
	var buf bytes.Buffer
	if err := alerts.ExportPrometheus(alerts.DefaultRules(), &buf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "settle.rules.yml"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "settle.test.yml")
	if err := os.WriteFile(path, []byte("rule_files: [settle.rules.yml]\nevaluation_interval: 1m\n"+tests), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", path)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// Under Prometheus, LLMDoubleBillingSuspected pages for a tenant whose attempts on one API
// are half resends after uncertain sends, with the API in its labels, though its other API's
// traffic, sent once each, would dilute the resends below the burn rate were the APIs summed;
// it stays quiet for a tenant with one such resend in six attempts (below min_requests),
// though its ratio is above the burn rate.
func TestDoubleBillingRuleUnderPromtool(t *testing.T) {
	promtoolTest(t, `
tests:
  - interval: 1m
    input_series:
      - series: 'settle_attempts_total{tenant="busy",kind="llm_call",provider="openai",outcome="ok",api="responses",instance="a"}'
        values: '0+10x90'
      - series: 'settle_llm_possible_duplicate_attempts_total{tenant="busy",kind="llm_call",provider="openai",api="responses",instance="a"}'
        values: '0+5x90'
      - series: 'settle_attempts_total{tenant="busy",kind="llm_call",provider="openai",outcome="ok",api="chat_completions",instance="a"}'
        values: '0+100x90'
      - series: 'settle_attempts_total{tenant="quiet",kind="llm_call",provider="openai",outcome="ok",api="chat_completions",instance="a"}'
        values: '0+0.1x90'
      - series: 'settle_llm_possible_duplicate_attempts_total{tenant="quiet",kind="llm_call",provider="openai",api="chat_completions",instance="a"}'
        values: '0x76 1x14'
    alert_rule_test:
      - eval_time: 80m
        alertname: LLMDoubleBillingSuspected
        exp_alerts:
          - exp_labels: {severity: page, tenant: busy, kind: llm_call, provider: openai, api: responses}
            exp_annotations:
              summary: "50% of llm_call attempts on responses at openai for busy are resends that may be billed twice"
              description: "LLM attempts of busy on responses time out and are sent again far more than usual over both the last hour and the last 5 minutes; each resend may be a second generation the provider bills."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#llmdoublebillingsuspected"
          - exp_labels: {severity: ticket, tenant: busy, kind: llm_call, provider: openai, api: responses}
            exp_annotations:
              summary: "50% of llm_call attempts on responses at openai for busy are possible double billing over 6h"
              description: "A slow, steady excess of LLM resends after uncertain sends."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#llmdoublebillingsuspected"
`)
}

// Under Prometheus, a double generation of an LLM call (counted as a double provider charge
// of kind llm_call) fires DoubleChargeDetected with kind="llm_call".
func TestLLMDoubleChargeUnderPromtool(t *testing.T) {
	promtoolTest(t, `
tests:
  - interval: 1m
    input_series:
      - series: 'settle_provider_charges_total{tenant="shop",kind="llm_call",provider="openai",orphan="false",double="true",instance="a"}'
        values: '0x10 1x20'
      - series: 'settle_provider_charges_total{tenant="shop",kind="llm_call",provider="openai",orphan="false",double="false",instance="a"}'
        values: '0+1x30'
    alert_rule_test:
      - eval_time: 30m
        alertname: DoubleChargeDetected
        exp_alerts:
          - exp_labels: {severity: page, tenant: shop, kind: llm_call, provider: openai}
            exp_annotations:
              summary: "1 double charge(s) of llm_call at openai for shop in the last 24h"
              description: "The provider billed one operation more than once (a refund made twice, or an LLM generation billed twice). Open the reconciliation exceptions and settle the extra charge."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#doublechargedetected"
`)
}
