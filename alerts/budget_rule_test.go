package alerts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/settle-dev/settle/alerts/alertstest"
)

// runbookRule is the Prometheus rule the runbook of alert gives operators to load: the first
// yaml block of its section.
func runbookRule(t *testing.T, alert string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## "+alert+"\n")
	if !ok {
		t.Fatalf("docs/runbooks.md has no section for %s", alert)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, rule, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatalf("the runbook of %s gives no rule", alert)
	}
	rule, _, _ = strings.Cut(rule, "```")
	return rule
}

// TestTheBudgetRuleOfTheRunbookUnderPromtool holds the rule the runbook gives for a tenant
// whose LLM budget stops its calls: under Prometheus it fires for the tenant whose calls are
// refused, with the refusals of every replica summed (each counts its own), says nothing of a
// tenant refused earlier and no more, and resolves 20 minutes after the last refusal
// (10 minutes of window, 10 of keep_firing_for).
// ops rule 8
func TestTheBudgetRuleOfTheRunbookUnderPromtool(t *testing.T) {
	promtool := alertstest.Need(t, alertstest.PromtoolBin, alertstest.PromtoolPkg)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "budget.rules.yml"), []byte(runbookRule(t, "TenantLLMBudgetSpent")), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := `rule_files: [budget.rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'settle_llm_budget_refused_total{tenant="shop",api="chat_completions",caller="gateway",instance="a"}'
        values: '0+2x30 60x40'
      - series: 'settle_llm_budget_refused_total{tenant="shop",api="chat_completions",caller="job",instance="b"}'
        values: '0+1x30 30x40'
      - series: 'settle_llm_budget_refused_total{tenant="bank",api="messages",caller="gateway",instance="a"}'
        values: '5x70'
    alert_rule_test:
      - eval_time: 15m
        alertname: TenantLLMBudgetSpent
        exp_alerts:
          - exp_labels: {severity: warning, tenant: shop}
            exp_annotations:
              summary: "shop's LLM budget of the day is spent: 30 calls refused in the last 10 minutes"
              description: "Every paid LLM call of shop is refused with 429 tenant_budget_spent until midnight UTC."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#tenantllmbudgetspent"
      - eval_time: 49m
        alertname: TenantLLMBudgetSpent
        exp_alerts:
          - exp_labels: {severity: warning, tenant: shop}
            exp_annotations:
              summary: "shop's LLM budget of the day is spent: 3 calls refused in the last 10 minutes"
              description: "Every paid LLM call of shop is refused with 429 tenant_budget_spent until midnight UTC."
              runbook_url: "https://github.com/settle-dev/settle/blob/main/docs/runbooks.md#tenantllmbudgetspent"
      - eval_time: 51m
        alertname: TenantLLMBudgetSpent
        exp_alerts: []
`
	path := filepath.Join(dir, "budget.test.yml")
	if err := os.WriteFile(path, []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", path)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
