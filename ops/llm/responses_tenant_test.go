package llm_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// TestPreviousResponseIsTheTenantsOwn: the provider's account is shared by every tenant, so a
// Responses call that goes on from previous_response_id would give the provider's model
// another tenant's conversation to answer from. A tenant that names another tenant's
// response id, or an id no call of its own created, is refused alike before anything is
// sent, and the refused request is recorded (ops rule 8); its own response goes on as asked.
func TestPreviousResponseIsTheTenantsOwn(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	first := `{"model":"fake-small","input":"my card ends 4242, refund order 77","max_output_tokens":24}`
	r, err := w.callOn(w.gw, "/v1/responses", "shop", "conv-1", first, "")
	if err != nil {
		t.Fatalf("shop's first response: %v", err)
	}
	var resp struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.body.Bytes(), &resp); err != nil || !strings.HasPrefix(resp.ID, "resp_") {
		t.Fatalf("shop's first response %s: %v", r.body.Bytes(), err)
	}
	next := func(prev string) string {
		return `{"model":"fake-small","input":"what did I say before?","max_output_tokens":24,"previous_response_id":"` + prev + `"}`
	}
	sent := len(w.fake.Generations())
	rejected := w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected'`)
	var told []string
	for _, prev := range []string{resp.ID, "resp_0123456789abcdef0123456789abcdef"} {
		r, err := w.callOn(w.gw, "/v1/responses", "bank", "steal-"+prev, next(prev), "")
		msg := wantRefused(t, r, err, ops.EINVALID, llm.ReasonInvalidRequest)
		told = append(told, strings.ReplaceAll(msg, prev, "ID"))
	}
	if told[0] != told[1] {
		t.Errorf("another tenant's response id is told %q, an unknown one %q", told[0], told[1])
	}
	if n := len(w.fake.Generations()); n != sent {
		t.Fatalf("the provider generated %d responses for another tenant's previous_response_id", n-sent)
	}
	if n := w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected'`); n != rejected+2 {
		t.Errorf("%d refused requests recorded, want 2", n-rejected)
	}
	if _, err := w.callOn(w.gw, "/v1/responses", "shop", "conv-2", next(resp.ID), ""); err != nil {
		t.Fatalf("shop going on from its own response: %v", err)
	}
	if n := len(w.fake.Generations()); n != sent+1 {
		t.Fatalf("shop's own next response: %d generations, want 1", n-sent)
	}
}

// TestConversationIsRefused: no conversation is created through Settle (it serves no
// conversations route), so every conversation the provider's shared account holds is
// another's, and a Responses call that names one would both read and add to it. Such a call
// is refused before anything is sent, and the refused request is recorded (ops rule 8).
func TestConversationIsRefused(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	sent := len(w.fake.Generations())
	rejected := w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected'`)
	for i, conv := range []string{`"conv_0123456789abcdef"`, `{"id":"conv_0123456789abcdef"}`} {
		body := `{"model":"fake-small","input":"what did we say?","max_output_tokens":24,"conversation":` + conv + `}`
		r, err := w.callOn(w.gw, "/v1/responses", "bank", "conv-"+strconv.Itoa(i), body, "")
		wantRefused(t, r, err, ops.EINVALID, llm.ReasonInvalidRequest)
	}
	if n := len(w.fake.Generations()); n != sent {
		t.Fatalf("the provider generated %d responses in a conversation no tenant created through Settle", n-sent)
	}
	if n := w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected'`); n != rejected+2 {
		t.Errorf("%d refused requests recorded, want 2", n-rejected)
	}
}
