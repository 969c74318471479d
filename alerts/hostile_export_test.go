package alerts_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/alerts/alertstest"
)

// TestHostileRulesExportUnderPromtool: a rules file whose names, labels and annotations hold
// quotes, braces, newlines and "{{" exports a file Prometheus loads, and its alert carries the
// labels as Settle sends them to Alertmanager. Prometheus expands a label's value as a
// template, Settle does not: a label holding "{{" made Prometheus refuse the whole exported
// file, every rule in it.
func TestHostileRulesExportUnderPromtool(t *testing.T) {
	promtool := alertstest.Need(t, alertstest.PromtoolBin, alertstest.PromtoolPkg)
	body := `groups:
  - name: "g \"quoted\" {braced}\nnewline"
    rules:
      - alert: A
        expr: {count: unknown_operations, above: 1}
        labels:
          team: "a \"b\" {c}\nd"
          brace: "{{ not a template }} {{"
          dollar: "$value and $labels"
        annotations:
          summary: "{{ $labels.tenant }} \"x\" {y}"
          pct: "{{ humanizePercentage $value }}"
`
	set, err := alerts.Parse("rules.yaml", []byte(body))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	var buf bytes.Buffer
	if err := alerts.ExportPrometheus(set, &buf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r.yml"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", filepath.Join(dir, "r.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, buf.String())
	}
	tests := `rule_files: [r.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'settle_operations_open{status="unknown", tenant="acme", kind="refund", provider="stripe"}'
        values: '5x5'
    alert_rule_test:
      - eval_time: 2m
        alertname: A
        exp_alerts:
          - exp_labels:
              team: "a \"b\" {c}\nd"
              brace: "{{ not a template }} {{"
              dollar: "$value and $labels"
            exp_annotations:
              summary: " \"x\" {y}"
              pct: "500%"
`
	if err := os.WriteFile(filepath.Join(dir, "t.yml"), []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "t.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s\n%s", err, out, buf.String())
	}
}
