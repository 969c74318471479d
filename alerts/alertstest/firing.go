package alertstest

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/settle-dev/settle/alerts"
)

// BudgetAlert is the built-in alert of a tenant whose LLM budget stops its calls, spent or
// with too little left for them (its instances' reason label says which).
const BudgetAlert = "TenantLLMBudgetSpent"

// InstanceLister lists the evaluator's alert instances: alerts.Store's AlertInstances, which
// the database's alert store and the tests' stores answer.
type InstanceLister interface {
	AlertInstances(ctx context.Context) ([]alerts.Instance, error)
}

// Firing returns the active (pending or firing) instances of the alert named alert in src;
// it fails t when src cannot be read.
func Firing(t testing.TB, src InstanceLister, alert string) []alerts.Instance {
	t.Helper()
	ins, err := src.AlertInstances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []alerts.Instance
	for _, in := range ins {
		if in.Alert == alert && in.State.Active() {
			out = append(out, in)
		}
	}
	return out
}

// SummariesByTenant returns the summaries of ins by their tenant label, as /alerts shows
// them; a tenant with two instances (a budget spent after its calls were refused as too
// large for what was left) has both, in order, joined by "; ".
func SummariesByTenant(ins []alerts.Instance) map[string]string {
	by := map[string][]string{}
	for _, in := range ins {
		by[in.Labels["tenant"]] = append(by[in.Labels["tenant"]], in.Annotations["summary"])
	}
	out := make(map[string]string, len(by))
	for tenant, s := range by {
		sort.Strings(s)
		out[tenant] = strings.Join(s, "; ")
	}
	return out
}

// BudgetStops returns the summaries of the active instances of BudgetAlert in src, by tenant.
func BudgetStops(t testing.TB, src InstanceLister) map[string]string {
	t.Helper()
	return SummariesByTenant(Firing(t, src, BudgetAlert))
}
