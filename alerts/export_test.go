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
