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

// TestAProviderRedirectIsNotFollowed: a provider (or a proxy before it) that answers a
// call's POST with a redirect generated nothing. Followed, a 301, 302 or 303 turns the POST
// into a GET of another address, whose 200 (a page, a list, a cached answer) the gateway
// would store and replay as this call's generation, with no evidence the provider made it
// (ops rule 9); a 307 would send the prompt wherever it points. The redirect is the
// provider's answer instead: a refusal, the call failed with nothing billed, and the
// address it pointed to never asked.
func TestAProviderRedirectIsNotFollowed(t *testing.T) {
	w := newGatewayWorld(t, gatewaySetup{})
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var posts, elsewhere atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("POST /chat/completions", func(rw http.ResponseWriter, req *http.Request) {
				posts.Add(1)
				http.Redirect(rw, req, "/elsewhere", status)
			})
			mux.HandleFunc("/elsewhere", func(rw http.ResponseWriter, _ *http.Request) {
				elsewhere.Add(1)
				rw.Header().Set("Content-Type", "application/json")
				_, _ = rw.Write([]byte(`{"id":"chatcmpl-not-generated","object":"chat.completion","created":1,"model":"fake-small","choices":[{"index":0,"message":{"role":"assistant","content":"a page"},"finish_reason":"stop"}]}`))
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			up := w.world.Upstream(srv.URL, openai.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"})
			gw, err := llm.New(llm.Config{Ledger: w.ledger, Upstream: up, Prices: llm.DefaultPrices(), Refs: w.db, Streams: w.db})
			if err != nil {
				t.Fatal(err)
			}
			key := "redirected-" + http.StatusText(status)
			r, err := w.callOn(gw, "/v1/chat/completions", "shop", key, chatBody("q", 0, false), "")
			if err == nil || r.began {
				t.Fatalf("the redirected call answered %s as a generation", r.body.Bytes())
			}
			if op := w.op(t, key); op.Status != ops.StatusFailed {
				t.Errorf("operation %s after a redirect, want failed: nothing was generated", op.Status)
			}
			if n, m := posts.Load(), elsewhere.Load(); n != 1 || m != 0 {
				t.Fatalf("%d POSTs and %d requests to the redirect's address, want 1 and 0", n, m)
			}
		})
	}
}
