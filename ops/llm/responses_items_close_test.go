package llm_test

import (
	"encoding/json"
	"testing"
	"time"
)

// TestAResponsesOutputCanBeHandedBackTheMomentTheClientHasIt: a Responses client may hand a
// response's output items back, by their ids, in its very next call, and the gateway takes
// an item only when it finds it among the tenant's kept answers (ops rule 12). Answered
// before its close was written, as a chat completion is, the client could send that call
// before the answer that holds the items was kept, and its own items were refused as
// unknown: a Responses answer reaches the client once its close is written, so everything
// it names is on record. Here the close is held: the client has nothing until it is
// released, and then hands its item straight back.
func TestAResponsesOutputCanBeHandedBackTheMomentTheClientHasIt(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHeldWorld(t)
			body := `{"model":"fake-small","input":"my card ends 4242","max_output_tokens":24}`
			if stream {
				body = `{"model":"fake-small","input":"my card ends 4242","max_output_tokens":24,"stream":true}`
			}
			done := make(chan callResult, 1)
			go func() {
				r, err := h.complete(&reply{}, h.gw, "/v1/responses", "shop", "held-"+name, body, "")
				done <- callResult{r, err}
			}()
			release := h.held(t)
			select {
			case got := <-done:
				release()
				t.Fatalf("the client had its answer (%v) while the close that keeps its items was held", got.err)
			case <-time.After(500 * time.Millisecond):
			}
			release()
			got := <-done
			if got.err != nil {
				t.Fatalf("the call: %v", got.err)
			}
			item := outputItem(t, h.gatewayWorld, "held-"+name)
			again := `{"model":"fake-small","max_output_tokens":24,"input":[{"type":"item_reference","id":"` + item + `"},{"role":"user","content":"and then?"}]}`
			if _, err := h.callOn(h.gw, "/v1/responses", "shop", "next-"+name, again, ""); err != nil {
				t.Fatalf("handing back its own item %s at once: %v", item, err)
			}
		})
	}
}

// outputItem is the id of the first output item of the answer key's operation kept.
func outputItem(t *testing.T, w *gatewayWorld, key string) string {
	t.Helper()
	op := w.op(t, key)
	var res struct {
		Output []struct {
			ID string `json:"id"`
		} `json:"output"`
	}
	if err := json.Unmarshal(op.Result, &res); err != nil || len(res.Output) == 0 || res.Output[0].ID == "" {
		t.Fatalf("the kept answer %s: %v", op.Result, err)
	}
	return res.Output[0].ID
}
