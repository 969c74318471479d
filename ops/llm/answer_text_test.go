package llm_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
)

// TestAnswerWithTextPostgresRefusesIsStored: a model's text may hold a NUL or half of a
// UTF-16 pair, which the provider's JSON escapes ("\u0000", "\ud83d") and PostgreSQL's
// jsonb refuses. Such an answer is the provider's success like any other: the call closes
// succeeded with it, and a repeat of the key is answered from the record without a second
// generation. A close that fails on it instead leaves the operation open after its client
// was answered, for a resend that bills again and fails the same way (ops rules 3, 9).
func TestAnswerWithTextPostgresRefusesIsStored(t *testing.T) {
	w := newGatewayWorld(t, gatewaySetup{})
	for name, content := range map[string]string{"nul": `a\u0000b`, "surrogate": `half an emoji \ud83d`} {
		t.Run(name, func(t *testing.T) {
			var sends atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
				if req.Method != http.MethodPost {
					http.NotFound(rw, req) // the adapter's look at the provider's store
					return
				}
				n := sends.Add(1)
				rw.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(rw, `{"id":"chatcmpl-%s-%d","object":"chat.completion","created":1,"model":"fake-small","choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, name, n, content)
			}))
			defer srv.Close()
			up := w.world.Upstream(srv.URL, openai.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"})
			gw, err := llm.New(llm.Config{Ledger: w.ledger, Upstream: up, Prices: llm.DefaultPrices(), Refs: w.db, Streams: w.db})
			if err != nil {
				t.Fatal(err)
			}
			key := "refused-text-" + name
			body := chatBody("say something odd", 0, false)
			r, err := w.callOn(gw, "/v1/chat/completions", "shop", key, body, "")
			id, _ := completion(t, r, err)
			op := w.op(t, key)
			if op.Status != ops.StatusSucceeded {
				t.Fatalf("operation %s after the provider's 200, want succeeded", op.Status)
			}
			w.clock.Advance(w.ledger.Limits.Lease + 1)
			again, err := w.callOn(gw, "/v1/chat/completions", "shop", key, body, "")
			if rid, _ := completion(t, again, err); rid != id || !again.head.Replayed {
				t.Fatalf("the repeat answered %s (replayed %v), want %s replayed", rid, again.head.Replayed, id)
			}
			if n := sends.Load(); n != 1 {
				t.Fatalf("the provider generated %d times for one key, want 1", n)
			}
		})
	}
}

// TestAnAnswerIDWithANulIsStored: the provider's id of its answer is stored in a text
// column, which takes no NUL; an id escaping one ("chatcmpl-\u0000") must not fail the close
// of a call already billed and answered, for a resend to bill again (ops rule 3). The call
// closes succeeded and a repeat is replayed without a second generation.
func TestAnAnswerIDWithANulIsStored(t *testing.T) {
	w := newGatewayWorld(t, gatewaySetup{})
	var sends atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			http.NotFound(rw, req)
			return
		}
		sends.Add(1)
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprint(rw, `{"id":"chatcmpl-\u0000nul","object":"chat.completion","created":1,"model":"fake-small","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	up := w.world.Upstream(srv.URL, openai.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"})
	gw, err := llm.New(llm.Config{Ledger: w.ledger, Upstream: up, Prices: llm.DefaultPrices(), Refs: w.db, Streams: w.db})
	if err != nil {
		t.Fatal(err)
	}
	body := chatBody("an odd id", 0, false)
	r, err := w.callOn(gw, "/v1/chat/completions", "shop", "nul-id", body, "")
	completion(t, r, err)
	if op := w.op(t, "nul-id"); op.Status != ops.StatusSucceeded {
		t.Fatalf("operation %s after the provider's 200, want succeeded", op.Status)
	}
	w.clock.Advance(w.ledger.Limits.Lease + 1)
	again, err := w.callOn(gw, "/v1/chat/completions", "shop", "nul-id", body, "")
	if completion(t, again, err); !again.head.Replayed || sends.Load() != 1 {
		t.Fatalf("the repeat: replayed %v after %d generations, want replayed after 1", again.head.Replayed, sends.Load())
	}
}
