package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
)

func fakeLLM(t *testing.T, o fake.LLMOptions) (*fake.LLM, string) {
	t.Helper()
	f := fake.NewLLM(o)
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, base
}

func client(t *testing.T, base string, mode openai.StoreMode) *openai.Client {
	t.Helper()
	c, err := openai.New(openai.Config{Name: "fake-llm", BaseURL: base, APIKey: "sk-test", Store: mode, AttemptTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const body = `{"model":"fake-small","messages":[{"role":"user","content":"summarise order 12"}],"store":true,"metadata":{"team":"support","settle_operation_id":"forged"}}`

// TestSendTagsEveryAttemptForLookup: each attempt asks the provider to store the completion
// with the operation's id and tenant in its metadata, beside the client's own keys (Settle's
// win), and the completion is then found by the operation's id, through the official SDK.
func TestSendTagsEveryAttemptForLookup(t *testing.T) {
	t.Parallel()
	f, base := fakeLLM(t, fake.LLMOptions{Seed: 1})
	c := client(t, base, openai.StoreAuto)
	ctx := context.Background()
	opID := ops.NewOperationID()
	r := c.Send(ctx, llm.Call{Body: []byte(body), OperationID: opID, TenantID: 42, Attempt: 1})
	if r.Outcome != ops.OutcomeOK {
		t.Fatalf("send: %+v", r)
	}
	g := f.Generations()
	if len(g) != 1 || !g[0].Stored || g[0].Metadata["settle_operation_id"] != opID || g[0].Metadata["settle_tenant"] != "42" || g[0].Metadata["team"] != "support" {
		t.Fatalf("the provider got %+v", g)
	}
	if c.StoreState(ctx) != llm.StoreOn {
		t.Fatal("the provider stores completions, but the client does not know it")
	}
	found, err := c.FindStored(ctx, opID)
	if err != nil || len(found) != 1 || found[0].ID != g[0].ID || found[0].OperationID != opID || found[0].Tenant != "42" {
		t.Fatalf("found %+v, %v", found, err)
	}
	var sent struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(r.Body, &sent)
	got, err := c.GetStored(ctx, sent.ID)
	if err != nil || got.ID != sent.ID {
		t.Fatalf("get %+v, %v", got, err)
	}
	if _, err := c.GetStored(ctx, "chatcmpl-none"); ops.ErrorCode(err) != ops.ENOTFOUND {
		t.Fatalf("a missing completion: %v", err)
	}
	if found, err := c.FindStored(ctx, ops.NewOperationID()); err != nil || len(found) != 0 {
		t.Fatalf("another operation found %+v, %v", found, err)
	}
}

// TestSendHonoursTheClientsStoreFalse: a client that asked the provider not to store its call
// is not overruled.
func TestSendHonoursTheClientsStoreFalse(t *testing.T) {
	t.Parallel()
	f, base := fakeLLM(t, fake.LLMOptions{Seed: 1})
	c := client(t, base, openai.StoreOn)
	r := c.Send(context.Background(), llm.Call{Body: []byte(`{"model":"fake-small","store":false,"messages":[{"role":"user","content":"hi"}]}`),
		OperationID: ops.NewOperationID(), TenantID: 1, Attempt: 1})
	if g := f.Generations(); r.Outcome != ops.OutcomeOK || len(g) != 1 || g[0].Stored || g[0].Metadata != nil {
		t.Fatalf("reply %+v, generations %+v", r, g)
	}
}

// TestAutoStoreOnAProviderWithoutIt: in auto mode a provider without stored completions gets
// plain calls, and the client says lookups are off; off never stores.
func TestAutoStoreOnAProviderWithoutIt(t *testing.T) {
	t.Parallel()
	for _, mode := range []openai.StoreMode{openai.StoreAuto, openai.StoreOff} {
		f, base := fakeLLM(t, fake.LLMOptions{Seed: 1, NoStore: true})
		c := client(t, base, mode)
		ctx := context.Background()
		if s := c.StoreState(ctx); s != llm.StoreOff {
			t.Fatalf("%s: store state %v, want off", mode, s)
		}
		r := c.Send(ctx, llm.Call{Body: []byte(`{"model":"fake-small","messages":[{"role":"user","content":"hi"}]}`),
			OperationID: ops.NewOperationID(), TenantID: 1, Attempt: 1})
		if g := f.Generations(); r.Outcome != ops.OutcomeOK || len(g) != 1 || g[0].Stored {
			t.Fatalf("%s: reply %+v, generations %+v", mode, r, g)
		}
	}
}

// TestAutoStoreFallsBackWhenTheProviderRefusesToStore: a provider that lists stored
// completions but refuses to store one (an organisation with zero data retention) answers
// the first tagged attempt 400, which billed nothing; in auto mode the client sends the
// client's own body at once, answers with that, and from then on sends plain calls and says
// lookups are off. With store on, the refusal is the answer: nothing is sent untagged.
func TestAutoStoreFallsBackWhenTheProviderRefusesToStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plain := []byte(`{"model":"fake-small","messages":[{"role":"user","content":"hi"}]}`)
	f, base := fakeLLM(t, fake.LLMOptions{Seed: 1, RefuseStoreWrites: true})
	c := client(t, base, openai.StoreAuto)
	if s := c.StoreState(ctx); s != llm.StoreOn {
		t.Fatalf("the probe found the listing answering, yet store is %v", s)
	}
	r := c.Send(ctx, llm.Call{Body: plain, OperationID: ops.NewOperationID(), TenantID: 1, Attempt: 1})
	if g := f.Generations(); r.Outcome != ops.OutcomeOK || len(g) != 1 || g[0].Stored || len(g[0].Metadata) != 0 {
		t.Fatalf("after the refusal: reply %+v, generations %+v; want one plain generation", r, g)
	}
	if s := c.StoreState(ctx); s != llm.StoreOff {
		t.Fatalf("after the refusal store is %v, want off", s)
	}
	r = c.Send(ctx, llm.Call{Body: plain, OperationID: ops.NewOperationID(), TenantID: 1, Attempt: 1})
	if g := f.Generations(); r.Outcome != ops.OutcomeOK || len(g) != 2 || g[1].Stored {
		t.Fatalf("the next call: reply %+v, generations %+v", r, g)
	}

	f, base = fakeLLM(t, fake.LLMOptions{Seed: 1, RefuseStoreWrites: true})
	on := client(t, base, openai.StoreOn)
	r = on.Send(ctx, llm.Call{Body: plain, OperationID: ops.NewOperationID(), TenantID: 1, Attempt: 1})
	if r.Outcome != ops.OutcomeInvalid || r.HTTPStatus != 400 || len(f.Generations()) != 0 {
		t.Fatalf("store on: reply %+v, %d generations; want the 400 and nothing billed", r, len(f.Generations()))
	}
}

// TestTaggingStaysWithinTheMetadataLimit: a client that already sends the provider's 16
// metadata pairs still gets its call through, tagged for lookup: Settle's two keys take the
// place of the client's last two in key order, and the completion is found by its id.
func TestTaggingStaysWithinTheMetadataLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, base := fakeLLM(t, fake.LLMOptions{Seed: 1})
	c := client(t, base, openai.StoreOn)
	meta := map[string]string{}
	for i := range 16 {
		meta[fmt.Sprintf("k%02d", i)] = "v"
	}
	b, _ := json.Marshal(map[string]any{"model": "fake-small", "messages": []map[string]string{{"role": "user", "content": "hi"}},
		"metadata": meta})
	id := ops.NewOperationID()
	r := c.Send(ctx, llm.Call{Body: b, OperationID: id, TenantID: 7, Attempt: 1})
	g := f.Generations()
	if r.Outcome != ops.OutcomeOK || len(g) != 1 || !g[0].Stored {
		t.Fatalf("reply %+v, generations %+v", r, g)
	}
	got := g[0].Metadata
	if len(got) != 16 || got[llm.MetaOperation] != id || got[llm.MetaTenant] != "7" || got["k13"] != "v" || got["k14"] != "" || got["k15"] != "" {
		t.Fatalf("stored metadata %v: want the client's first 14 keys and Settle's two", got)
	}
	if found, err := c.FindStored(ctx, id); err != nil || len(found) != 1 {
		t.Fatalf("lookup found %d (%v), want 1", len(found), err)
	}
}

// TestSendPostsToTheCallsPath: an embeddings call goes to /embeddings as the client sent it,
// never tagged with store or metadata (which the embeddings API does not take), and its
// answer is the provider's as received.
func TestSendPostsToTheCallsPath(t *testing.T) {
	t.Parallel()
	f, base := fakeLLM(t, fake.LLMOptions{Seed: 1})
	c := client(t, base, openai.StoreOn)
	in := `{"model":"text-embedding-3-small","input":"summarise order 12","dimensions":8}`
	r := c.Send(context.Background(), llm.Call{Path: "/embeddings", Body: []byte(in), OperationID: ops.NewOperationID(), TenantID: 42, Attempt: 1})
	var out struct {
		Object string `json:"object"`
		Data   []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if r.Outcome != ops.OutcomeOK || json.Unmarshal(r.Body, &out) != nil || out.Object != "list" || len(out.Data) != 1 || len(out.Data[0].Embedding) != 8 {
		t.Fatalf("send: %+v", r)
	}
	g := f.GenerationsOf(fake.APIEmbeddings)
	if len(g) != 1 || g[0].Stored || len(g[0].Metadata) != 0 || len(f.Generations()) != 1 {
		t.Fatalf("the provider got %+v", f.Generations())
	}
}
