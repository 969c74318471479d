package llm_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// sandboxAnswer is a Responses call of tenant with a code_interpreter tool; it returns the
// answer's message item as the provider wrote it and the file id its text cites.
func (w *gatewayWorld) sandboxAnswer(t *testing.T, tenant, key string) (json.RawMessage, string) {
	t.Helper()
	r, err := w.callOn(w.gw, "/v1/responses", tenant, key, `{"model":"fake-small","max_output_tokens":24,"input":"write it to a csv",`+
		`"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, "")
	if err != nil {
		t.Fatalf("%s's call with a sandbox: %v", tenant, err)
	}
	var answer struct {
		Output []json.RawMessage `json:"output"`
	}
	var item struct {
		Content []struct {
			Annotations []struct {
				FileID string `json:"file_id"`
			} `json:"annotations"`
		} `json:"content"`
	}
	if err := json.Unmarshal(r.body.Bytes(), &answer); err != nil || len(answer.Output) == 0 {
		t.Fatalf("%s's answer %s: %v", tenant, r.body.Bytes(), err)
	}
	if err := json.Unmarshal(answer.Output[0], &item); err != nil || len(item.Content) == 0 || len(item.Content[0].Annotations) == 0 {
		t.Fatalf("%s's answer cites no file: %s (%v)", tenant, answer.Output[0], err)
	}
	return answer.Output[0], item.Content[0].Annotations[0].FileID
}

// handBack is a Responses request whose input is item followed by the user's next turn.
func handBack(item string) string {
	return `{"model":"fake-small","max_output_tokens":24,"input":[` + item + `,{"role":"user","content":"and then?"}]}`
}

// TestAnOwnOutputItemHandedBackKeepsTheFileItCites: a client carrying a conversation on
// hands back the output items of its own answers, and the provider cites in them the files
// its code_interpreter wrote (container_file_citation, file_id). That file id is the
// provider's word in this tenant's own answer, so the item handed back exactly as Settle
// kept it is sent (ops rule 12 refuses only what Settle cannot tell as the tenant's own). A
// file id that the kept item does not hold is refused as any other file id, before anything
// is sent: one edited into the tenant's own item, one cited by another of its answers, and
// any in an item of another tenant's answer.
func TestAnOwnOutputItemHandedBackKeepsTheFileItCites(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	item, file := w.sandboxAnswer(t, "shop", "sandbox")
	sent := len(w.fake.Generations())
	if _, err := w.callOn(w.gw, "/v1/responses", "shop", "own-item", handBack(string(item)), ""); err != nil {
		t.Fatalf("shop handing back its own item, which cites %s: %v", file, err)
	}
	if n := len(w.fake.Generations()); n != sent+1 {
		t.Fatalf("shop's own item handed back: %d generations, want 1", n-sent)
	}

	stranger := "file-0123456789abcdef"
	edited := strings.Replace(string(item), file, stranger, 1)
	var added map[string]any
	if err := json.Unmarshal(item, &added); err != nil {
		t.Fatal(err)
	}
	part := added["content"].([]any)[0].(map[string]any)
	part["annotations"] = append(part["annotations"].([]any), map[string]any{"type": "file_citation", "file_id": stranger, "filename": "x.pdf", "index": 0})
	withCitation, _ := json.Marshal(added)
	plain, err := w.callOn(w.gw, "/v1/responses", "shop", "plain", `{"model":"fake-small","max_output_tokens":24,"input":"hi"}`, "")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Output []map[string]any `json:"output"`
	}
	if err := json.Unmarshal(plain.body.Bytes(), &p); err != nil || len(p.Output) == 0 {
		t.Fatalf("shop's plain answer %s: %v", plain.body.Bytes(), err)
	}
	p.Output[0]["content"].([]any)[0].(map[string]any)["annotations"] = []any{map[string]any{"type": "container_file_citation", "container_id": "cntr_1", "file_id": file}}
	borrowed, _ := json.Marshal(p.Output[0])
	part["annotations"] = []any{map[string]any{"type": "file_citation", "file_id": map[string]any{"file_id": stranger}}}
	nested, _ := json.Marshal(added)
	for i, body := range []string{edited, string(withCitation), string(borrowed), string(nested)} {
		w.refusedNamed(t, "/v1/responses", "shop", "edited-"+strconv.Itoa(i), handBack(body), "file_id")
	}
	w.refusedNamed(t, "/v1/responses", "bank", "steal", handBack(string(item)), "input[0]")
}
