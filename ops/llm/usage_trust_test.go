package llm_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
)

// TestAbsurdUsageIsNotACost: a provider's 200 whose usage counts are negative or absurd
// (10^18 tokens) is relayed to its client as the provider sent it and closes the call
// succeeded, but its cost is recorded as unknown, never as a negative figure or one that
// wrapped past the largest bigint: the spend that sums every call's cost must not go
// backwards or overflow because one answer lied (ops rule 12: no figure says more than
// Settle knows).
func TestAbsurdUsageIsNotACost(t *testing.T) {
	w := newGatewayWorld(t, gatewaySetup{})
	usage := map[string]string{
		"negative": `{"prompt_tokens":-5000000000,"completion_tokens":-1,"total_tokens":-5000000001}`,
		"huge":     `{"prompt_tokens":1000000000000000000,"completion_tokens":1000000000000000000,"total_tokens":2000000000000000000}`,
		"wraps":    `{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807,"total_tokens":9223372036854775807}`,
	}
	for name, u := range usage {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
				rw.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(rw, `{"id":"chatcmpl-%s","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":%s}`, name, u)
			}))
			defer srv.Close()
			up := w.world.Upstream(srv.URL, openai.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"})
			gw, err := llm.New(llm.Config{Ledger: w.ledger, Upstream: up, Prices: llm.DefaultPrices(), Refs: w.db, Streams: w.db})
			if err != nil {
				t.Fatal(err)
			}
			key := "absurd-usage-" + name
			r, err := w.callOn(gw, "/v1/chat/completions", "shop", key, chatBody("q", 0, false), "")
			completion(t, r, err)
			op := w.op(t, key)
			if op.Status != ops.StatusSucceeded {
				t.Fatalf("operation %s, want succeeded: the provider answered", op.Status)
			}
			if op.CostMicros != 0 {
				t.Errorf("operation's cost %d micros from usage %s; want 0 (unknown)", op.CostMicros, u)
			}
			if n := w.count(t, `SELECT count(*) FROM operations WHERE id = $1 AND (usage->>'cost_known')::boolean`, op.ID); n != 0 {
				t.Errorf("usage %s recorded as a known cost", u)
			}
		})
	}
}
