package alertstore_test

import (
	"fmt"
	"testing"
	"time"
)

// TestTimeoutRateByAPIFires: a rule may group any ratio by api, as its parser accepts. A
// tenant whose Responses calls time out half of the time, among chat completions that never
// do, fires a timeout-rate rule grouped by API for api="responses" (ops rule 8: timeout
// rates are counted facts, per API as per tenant). The alert source kept the API of the
// possible duplicates and of their attempts only: the timeouts had no API, so the rule
// compared none with every attempt of the API and never fired.
func TestTimeoutRateByAPIFires(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := range 6 {
		f.llmCallOf(t, "/v1/responses", fmt.Sprintf("resp-%d", i), true)
	}
	for i := range 20 {
		f.llmCallOf(t, "/v1/chat/completions", fmt.Sprintf("chat-%d", i), false)
	}
	f.Clock.Advance(time.Second)
	rig := newAlertRig(t, f, `groups:
  - name: api
    rules:
      - alert: TimeoutsByAPI
        expr:
          ratio: timeouts / attempts
          window: 1h
          above: 0.3
          by: [tenant, api]
`, nil)
	rig.evaluate(t)
	got := firing(t, f, "TimeoutsByAPI")
	if len(got) != 1 || got[0]["api"] != "responses" || got[0]["tenant"] != "acme" {
		t.Fatalf("TimeoutsByAPI firing for %v, want acme's responses only", got)
	}
}
