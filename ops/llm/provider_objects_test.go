package llm_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// refusedNamed sends body for tenant on route and wants it refused before anything was sent,
// as an invalid request whose message names field, and recorded as the tenant's refused
// request (ops rule 8). It returns the message.
func (w *gatewayWorld) refusedNamed(t *testing.T, route, tenant, key, body, field string) string {
	t.Helper()
	sent := len(w.fake.Generations())
	rejected := w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected'`)
	r, err := w.callOn(w.gw, route, tenant, key, body, "")
	msg := wantRefused(t, r, err, ops.EINVALID, llm.ReasonInvalidRequest)
	if !strings.Contains(msg, field) {
		t.Errorf("%s: the refusal %q does not name %s", body, msg, field)
	}
	if n := len(w.fake.Generations()); n != sent {
		t.Errorf("%s: the provider generated %d answers for it", body, n-sent)
	}
	if n := w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected'`); n != rejected+1 {
		t.Errorf("%s: %d refused requests recorded, want 1", body, n-rejected)
	}
	return msg
}

// TestProviderObjectsByIDAreRefused: the provider's account is shared by every tenant, and
// Settle serves no files, vector stores, containers or prompts, so no such object the
// provider holds is any tenant's own (ops rule 12: Settle cannot say whose it is). A call
// that names one by id would have the provider read another tenant's document, index or
// sandbox into the answer; each is refused before anything is sent, naming its field, and
// recorded as the tenant's refused request (ops rule 8).
func TestProviderObjectsByIDAreRefused(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	resp := func(extra string) string {
		return `{"model":"fake-small","max_output_tokens":24,` + extra + `}`
	}
	userParts := func(part string) string {
		return `"input":[{"role":"user","content":[{"type":"input_text","text":"what does it say?"},` + part + `]}]`
	}
	for i, c := range []struct{ route, body, field string }{
		{"/v1/responses", resp(userParts(`{"type":"input_file","file_id":"file-0123456789abcdef"}`)), "file_id"},
		{"/v1/responses", resp(userParts(`{"type":"input_image","detail":"auto","file_id":"file-0123456789abcdef"}`)), "file_id"},
		{"/v1/responses", resp(`"input":[{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_file","file_id":"file-0123456789abcdef"}]}]`), "file_id"},
		{"/v1/responses", resp(`"input":"find the contract","tools":[{"type":"file_search","vector_store_ids":["vs_0123456789abcdef"]}]`), "vector_store_ids"},
		{"/v1/responses", resp(`"input":"run it","tools":[{"type":"code_interpreter","container":"cntr_0123456789abcdef"}]`), "container"},
		{"/v1/responses", resp(`"input":"draw it","tools":[{"type":"image_generation","input_image_mask":{"file_id":"file-0123456789abcdef"}}]`), "file_id"},
		{"/v1/responses", resp(`"input":"hello","prompt":{"id":"pmpt_0123456789abcdef","version":"2"}`), "prompt"},
		{"/v1/chat/completions", `{"model":"fake-small","max_tokens":24,"messages":[{"role":"user","content":[{"type":"text","text":"summarise"},{"type":"file","file":{"file_id":"file-0123456789abcdef"}}]}]}`, "file_id"},
		{"/v1/chat/completions", `{"model":"fake-small","max_tokens":24,"messages":[{"role":"user","content":[{"type":"file","file":{"file\u005fid":"file-0123456789abcdef"}}]}]}`, "file_id"},
		{"/v1/chat/completions", `{"model":"fake-small","max_tokens":24,"messages":[{"role":"user","content":"say it again"},{"role":"assistant","audio":{"id":"audio_0123456789abcdef"}}]}`, "audio"},
	} {
		w.refusedNamed(t, c.route, "bank", "obj-"+strconv.Itoa(i), c.body, c.field)
	}
	// What stays the tenant's own is sent as before: a file given inline, a container the
	// provider creates for this call.
	for i, body := range []string{
		resp(userParts(`{"type":"input_file","filename":"a.txt","file_data":"data:text/plain;base64,aGk="}`)),
		resp(`"input":"run it","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]`),
	} {
		if _, err := w.callOn(w.gw, "/v1/responses", "bank", "own-"+strconv.Itoa(i), body, ""); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// TestItemReferencesAreTheTenantsOwn: a Responses call may name an item of a response the
// provider stored (an item_reference, an output item given by its id, an MCP approval
// answering a request by its id), and the provider reads that item from its shared store,
// whoever created it. An id is taken only when it is an output item of one of the calling
// tenant's own responses through Settle; another tenant's and an unknown one are refused
// alike before anything is sent (ops rule 12: the answer does not tell that the id exists),
// and the refused request is recorded (ops rule 8).
func TestItemReferencesAreTheTenantsOwn(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	r, err := w.callOn(w.gw, "/v1/responses", "shop", "first", `{"model":"fake-small","input":"my card ends 4242","max_output_tokens":24}`, "")
	if err != nil {
		t.Fatalf("shop's first response: %v", err)
	}
	var first struct {
		Output []struct {
			ID string `json:"id"`
		} `json:"output"`
	}
	if err := json.Unmarshal(r.body.Bytes(), &first); err != nil || len(first.Output) == 0 || first.Output[0].ID == "" {
		t.Fatalf("shop's first response %s: %v", r.body.Bytes(), err)
	}
	item := first.Output[0].ID
	refs := []struct {
		field string
		body  func(id string) string
	}{
		{"input[0] (item_reference) id", func(id string) string {
			return `{"model":"fake-small","max_output_tokens":24,"input":[{"type":"item_reference","id":"` + id + `"},{"role":"user","content":"and then?"}]}`
		}},
		{"input[0].id", func(id string) string {
			return `{"model":"fake-small","max_output_tokens":24,"input":[{"type":"message","role":"assistant","id":"` + id + `","content":[{"type":"output_text","text":"ok"}]},{"role":"user","content":"and then?"}]}`
		}},
		{"input[0].approval_request_id", func(id string) string {
			return `{"model":"fake-small","max_output_tokens":24,"input":[{"type":"mcp_approval_response","approve":true,"approval_request_id":"` + id + `"}]}`
		}},
	}
	for i, ref := range refs {
		var told []string
		for j, id := range []string{item, "msg_0123456789abcdef0123456789abcdef"} {
			msg := w.refusedNamed(t, "/v1/responses", "bank", "steal-"+strconv.Itoa(i)+"-"+strconv.Itoa(j), ref.body(id), ref.field)
			told = append(told, strings.ReplaceAll(msg, id, "ID"))
		}
		if told[0] != told[1] {
			t.Errorf("%s: another tenant's item is told %q, an unknown one %q", ref.field, told[0], told[1])
		}
	}
	sent := len(w.fake.Generations())
	for i, ref := range refs[:2] {
		if _, err := w.callOn(w.gw, "/v1/responses", "shop", "own-"+strconv.Itoa(i), ref.body(item), ""); err != nil {
			t.Fatalf("shop naming its own output item by %s: %v", ref.field, err)
		}
	}
	if n := len(w.fake.Generations()); n != sent+2 {
		t.Fatalf("shop's own item references: %d generations, want 2", n-sent)
	}
}

// TestAFieldGivenTwiceIsRefused: Settle checks the last value of a key given twice in one
// object, as encoding/json reads it; a provider that read the first would be sent another
// tenant's object that Settle never checked (ops rule 12). A request that gives a field
// naming such objects twice, at the top or inside, is refused before anything is sent,
// naming the field, and recorded (ops rule 8).
func TestAFieldGivenTwiceIsRefused(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	for i, c := range []struct{ route, body, field string }{
		{"/v1/chat/completions", `{"model":"fake-small","max_tokens":24,"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-0123456789abcdef"}}]}],"messages":[{"role":"user","content":"hi"}]}`, "messages"},
		{"/v1/chat/completions", `{"model":"fake-small","max_tokens":24,"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-0123456789abcdef","file_id":null}}]}]}`, "messages[0].content[0].file.file_id"},
		{"/v1/responses", `{"model":"fake-small","max_output_tokens":24,"input":"hi","conversation":"conv_0123456789abcdef","conversation":null}`, "conversation"},
		{"/v1/responses", `{"model":"fake-small","max_output_tokens":24,"input":"hi","prompt":{"id":"pmpt_0123456789abcdef"},"prompt":null}`, "prompt"},
		{"/v1/responses", `{"model":"fake-small","max_output_tokens":24,"input":"run it","tools":[{"type":"code_interpreter","container":"cntr_0123456789abcdef","container":{"type":"auto"}}]}`, "tools[0].container"},
		{"/v1/responses", `{"model":"fake-small","max_output_tokens":24,"input":[{"type":"item_reference","id":"msg_0123456789abcdef","id":null},{"role":"user","content":"and then?"}]}`, "input[0].id"},
	} {
		w.refusedNamed(t, c.route, "bank", "twice-"+strconv.Itoa(i), c.body, c.field+" is given twice")
	}
}
