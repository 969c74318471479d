package llm_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
)

// TestAnAbsurdRetryAfterIsNotAnInvitation: a 429 whose Retry-After (or OpenAI's
// Retry-After-Ms) asks for a wait far beyond the call's deadline ends the call's sends at
// once, and the client is told to wait: the wait is never misread (a duration past the
// largest one overflows to a negative) as leave to send again at once (ops rule 4: backoff
// honours Retry-After).
func TestAnAbsurdRetryAfterIsNotAnInvitation(t *testing.T) {
	w := newGatewayWorld(t, gatewaySetup{})
	for name, header := range map[string][2]string{
		"ms":      {"Retry-After-Ms", "1e30"},
		"seconds": {"Retry-After", "1e30"},
		"inf":     {"Retry-After-Ms", "Inf"},
	} {
		t.Run(name, func(t *testing.T) {
			var sends atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
				if req.Method != http.MethodPost {
					http.NotFound(rw, req)
					return
				}
				sends.Add(1)
				rw.Header().Set(header[0], header[1])
				rw.Header().Set("Content-Type", "application/json")
				rw.WriteHeader(http.StatusTooManyRequests)
				_, _ = rw.Write([]byte(`{"error":{"message":"slow down","type":"rate_limit_error"}}`))
			}))
			defer srv.Close()
			up := w.world.Upstream(srv.URL, openai.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"})
			gw, err := llm.New(llm.Config{Ledger: w.ledger, Upstream: up, Prices: llm.DefaultPrices(), Refs: w.db, Streams: w.db})
			if err != nil {
				t.Fatal(err)
			}
			r, err := w.callOn(gw, "/v1/chat/completions", "shop", "absurd-retry-after-"+name, chatBody("q", 0, false), "")
			wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonRateLimited)
			if p, _ := llm.ProblemOf(err); p.RetryAfter <= 0 {
				t.Errorf("the client is told to retry after %s", p.RetryAfter)
			}
			if n := sends.Load(); n != 1 {
				t.Fatalf("%d sends after a 429 asking for a wait of %s %s, want 1", n, header[1], header[0])
			}
		})
	}
}
