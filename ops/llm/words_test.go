package llm

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// refsStore is a provider that stores chat completions and responses, with the ids recorded
// on attempts read back beside it, holding none.
type refsStore struct{}

func (refsStore) Name() string                                         { return "openai" }
func (refsStore) StoreState(context.Context) Store                     { return StoreOn }
func (refsStore) FindStored(context.Context, string) ([]Stored, error) { return nil, nil }
func (refsStore) GetStored(context.Context, string) (*Stored, error) {
	return nil, ops.Errorf(ops.ENOTFOUND, "none")
}
func (refsStore) GetResponse(context.Context, string) (*Stored, error) {
	return nil, ops.Errorf(ops.ENOTFOUND, "none")
}
func (refsStore) RecordAttemptRef(context.Context, string, int, string, bool) error { return nil }
func (refsStore) AttemptRefs(context.Context, string) (map[int]string, error) {
	return map[int]string{}, nil
}

// TestEachAPISaysWhatItsLookupCanDo: what a call's page, its lookup and the gateway's answer
// to an unknown outcome say is its own API's (ops rule 12): a message and an embeddings call
// have nothing to look up and a person settles them, without a word of chat completions; a
// response is looked up in the provider's stored responses by the id recorded on its attempt,
// and the gateway says so when its store and the recorded ids can be read; a chat completion
// keeps its stored completions. Every API names the record a person closes it with.
func TestEachAPISaysWhatItsLookupCanDo(t *testing.T) {
	g := &Gateway{cfg: Config{Stored: refsStore{}, Refs: refsStore{}, Reconciled: true}}
	ctx := context.Background()
	for _, c := range []struct {
		route, provider, hint string
		// available is what Available says without a provider of stored answers, and next
		// what the gateway tells the client with one.
		available, next string
		// chatFree: nothing said mentions a chat completion.
		chatFree bool
	}{
		{chatRoute, "openai", "chatcmpl-...", "No LLM provider whose stored completions Settle reads is configured on this server.",
			"the reconciler looks this one up in openai's stored completions", false},
		{responsesRoute, "openai", "resp_...", "No LLM provider whose stored responses Settle reads is configured on this server.",
			"the reconciler looks this one up in openai's stored responses", true},
		{MessagesRoute, "anthropic", "msg_...", "Anthropic takes no idempotency key and has no lookup of a message",
			"until a person settles operation", true},
		{embeddingsRoute, "openai", "req_...", "There is nothing to look up for an embeddings call: openai gives its answer no id",
			"until a person settles operation", true},
	} {
		op := &ops.Operation{ID: "op-1", TenantID: 7, Kind: ops.KindLLMCall, Provider: c.provider, Status: ops.StatusUnknown,
			Request: []byte(`{"route":"` + c.route + `","body":{"model":"m"}}`)}
		said := []string{(*Lookups)(nil).Available(ctx, op), g.whatNext(ctx, op), ByHand(op), RecordOf(op).Label, RecordOf(op).Fetch}
		if got := said[0]; !strings.HasPrefix(got, c.available) {
			t.Errorf("%s: Available says %q, want %q", c.route, got, c.available)
		}
		if got := said[1]; !strings.Contains(got, c.next) {
			t.Errorf("%s: the gateway says %q, want %q", c.route, got, c.next)
		}
		if rec := RecordOf(op); rec.Hint != c.hint || rec.Label == "" || rec.Fetch == "" || !strings.Contains(said[2], "("+c.hint+")") {
			t.Errorf("%s: record %+v, by hand %q; want %s", c.route, rec, said[2], c.hint)
		}
		for _, s := range said {
			if c.chatFree && (strings.Contains(strings.ToLower(s), "completion") || strings.Contains(s, "chatcmpl")) {
				t.Errorf("%s says %q", c.route, s)
			}
		}
	}
	if got, want := strings.Join(APINames(), ","), "chat completions,embeddings,responses,messages"; got != want {
		t.Errorf("APIs %s, want %s", got, want)
	}
	if got := Kind().APIs; len(got) != len(apis) {
		t.Errorf("the llm_call kind registers the APIs %v", got)
	}
}
