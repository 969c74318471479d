package web_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/llm"
)

// TestMessagesRefuseTheAccountsObjects: Anthropic's account is shared by every tenant, and a
// Messages request can name what the account holds by id: a file of the Files API as a
// document's or an image's source or a container upload, a code execution container, a
// custom skill. Settle serves none of those, so none is any tenant's own (ops rule 12), and
// a request naming one, or giving such a field twice, is answered 400 in Anthropic's error shape, naming the field, with
// nothing sent to Anthropic and the refused request recorded as the tenant's (ops rule 8).
// The input of a tool call is the client's own data, whatever its keys.
func TestMessagesRefuseTheAccountsObjects(t *testing.T) {
	t.Parallel()
	w := newMessagesWorld(t, 0)
	auth := []string{"x-api-key", w.tokens["shop"], "anthropic-beta", "files-api-2025-04-14"}
	user := func(block string) string {
		return `{"model":"claude-haiku-4-5","max_tokens":32,"messages":[{"role":"user","content":[{"type":"text","text":"what does it say?"},` + block + `]}]}`
	}
	withContainer := func(c string) string {
		return `{"model":"claude-haiku-4-5","max_tokens":32,"container":` + c + `,"messages":[{"role":"user","content":"run it"}]}`
	}
	for i, c := range []struct{ body, field string }{
		{user(`{"type":"document","source":{"type":"file","file_id":"file_011CNha8iCJcU1wXNR6q4V8w"}}`), "file_id"},
		{user(`{"type":"image","source":{"type":"file","file_id":"file_011CNha8iCJcU1wXNR6q4V8w"}}`), "file_id"},
		{user(`{"type":"container_upload","file_id":"file_011CNha8iCJcU1wXNR6q4V8w"}`), "file_id"},
		{`{"model":"claude-haiku-4-5","max_tokens":32,"system":[{"type":"text","text":"x"},{"type":"document","source":{"type":"file","file\u005fid":"file_011"}}],"messages":[{"role":"user","content":"hi"}]}`, "file_id"},
		{withContainer(`"container_011CNha8iCJcU1wXNR6q4V8w"`), "container"},
		{withContainer(`{"id":"container_011CNha8iCJcU1wXNR6q4V8w"}`), "container.id"},
		{withContainer(`{"skills":[{"type":"custom","skill_id":"skill_01AbCdEf","version":"latest"}]}`), "container.skills"},
		{`{"model":"claude-haiku-4-5","max_tokens":32,"container":"container_011CNha8iCJcU1wXNR6q4V8w","container":null,"messages":[{"role":"user","content":"run it"}]}`, "container is given twice"},
	} {
		resp, b := w.post(t, c.body, append(auth, "Idempotency-Key", "obj-"+strconv.Itoa(i))...)
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(string(b), `{"error":{`) ||
			!strings.Contains(string(b), `"type":"invalid_request_error"`) || !strings.Contains(string(b), `"error_code":"`+llm.ReasonInvalidRequest+`"`) ||
			!strings.Contains(string(b), c.field) {
			t.Errorf("%s: %d %s; want 400 naming %s", c.body, resp.StatusCode, b, c.field)
		}
	}
	if n := len(w.fake.Requests()); n != 0 {
		t.Fatalf("Anthropic was sent %d requests naming its account's objects", n)
	}
	if n := w.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected'`); n != 8 {
		t.Errorf("%d refused requests recorded, want 8", n)
	}
	for i, body := range []string{
		`{"model":"claude-haiku-4-5","max_tokens":32,"messages":[{"role":"user","content":"open it"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"open_file","input":{"file_id":"F-77"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"it says hi"}]}]}`,
		withContainer(`{"skills":[{"type":"anthropic","skill_id":"pptx","version":"latest"}]}`),
	} {
		if resp, b := w.post(t, body, append(auth, "Idempotency-Key", "own-"+strconv.Itoa(i))...); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", body, resp.StatusCode, b)
		}
	}
}
