package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
)

// storeDirect creates a stored completion at the fake the way anyone holding the provider
// account's key can, without Settle: with the metadata given (none when nil).
func storeDirect(t *testing.T, base string, meta map[string]string) string {
	t.Helper()
	req := map[string]any{"model": "fake-small", "store": true,
		"messages": []map[string]string{{"role": "user", "content": "summarise order 12"}}}
	if meta != nil {
		req["metadata"] = meta
	}
	b, _ := json.Marshal(req)
	r, err := http.NewRequest(http.MethodPost, base+"/chat/completions", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer sk-test")
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != http.StatusOK || c.ID == "" {
		t.Fatalf("store a completion: %d %v", resp.StatusCode, err)
	}
	return c.ID
}

// TestLookupsAcceptOnlyCompletionsTaggedForTheirOperation: the provider account's store is
// shared by every tenant and by anyone holding its key, so a stored completion is this
// operation's only when its metadata names both the operation and its tenant, as Settle
// tags every attempt. One without that tag, or naming another tenant, neither closes the
// operation in a lookup nor closes it when a person gives the completion's id (ops rules 9
// and 12: a completion nobody can tie to this call is not the provider's word about it).
func TestLookupsAcceptOnlyCompletionsTaggedForTheirOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, base := fakeLLM(t, fake.LLMOptions{Seed: 1})
	c := client(t, base, openai.StoreOn)
	op := &ops.Operation{ID: ops.NewOperationID(), TenantID: 7, Kind: ops.KindLLMCall, Provider: "fake-llm"}
	k := &llm.Lookups{Store: c, Prices: llm.DefaultPrices()}

	bare := storeDirect(t, base, nil)
	unowned := storeDirect(t, base, map[string]string{llm.MetaOperation: op.ID})
	otherTenant := storeDirect(t, base, map[string]string{llm.MetaOperation: op.ID, llm.MetaTenant: "80417"})
	r := c.Send(ctx, llm.Call{Body: []byte(body), OperationID: op.ID, TenantID: op.TenantID, Attempt: 1})
	var own struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.Body, &own); r.Outcome != ops.OutcomeOK || err != nil {
		t.Fatalf("send: %+v", r)
	}

	found, err := k.Find(ctx, op)
	if err != nil || len(found) != 1 || found[0].ID != own.ID {
		var ids []string
		for _, s := range found {
			ids = append(ids, s.ID)
		}
		t.Fatalf("the lookup found %v (%v), want only Settle's own %s", ids, err, own.ID)
	}

	for _, id := range []string{bare, unowned} {
		// ops rule 9
		res, _, err := k.Fetch(ctx, op, id)
		if ops.ErrorCode(err) != ops.EINVALID || res != nil || !strings.Contains(ops.ErrorMessage(err), "does not name this operation") {
			t.Errorf("a person's close with untagged %s: result %v, err %v; want it refused", id, res != nil, err)
		}
	}
	// ops rule 9
	if res, _, err := k.Fetch(ctx, op, "chatcmpl-madeup"); ops.ErrorCode(err) != ops.ENOTFOUND || res != nil {
		t.Errorf("a person's close with a completion the provider does not hold: result %v, err %v; want ENOTFOUND", res != nil, err)
	}
	if res, _, err := k.Fetch(ctx, op, otherTenant); ops.ErrorCode(err) != ops.EINVALID || res != nil || strings.Contains(ops.ErrorMessage(err), "80417") {
		t.Errorf("a person's close with another tenant's completion: result %v, err %v; want it refused without naming the tenant", res != nil, err)
	}
	if res, why, err := k.Fetch(ctx, op, own.ID); err != nil || res == nil || res.ProviderRef != own.ID {
		t.Errorf("a person's close with the operation's own completion: %v %q %v", res, why, err)
	}
}

// upstreamSpy stands in front of the fake provider and keeps the body of every completion
// request that reached it; with unknownStore it fails every read of the store, so a client
// in auto mode cannot tell whether the provider stores completions.
type upstreamSpy struct {
	mu     sync.Mutex
	bodies [][]byte
}

func spyOn(t *testing.T, f *fake.LLM, unknownStore bool) (*upstreamSpy, string) {
	t.Helper()
	s := &upstreamSpy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && unknownStore {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			s.mu.Lock()
			s.bodies = append(s.bodies, b)
			s.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		f.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return s, srv.URL + "/v1"
}

// metadata returns the metadata of every request that reached the provider.
func (s *upstreamSpy) metadata(t *testing.T) []map[string]string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]string
	for _, b := range s.bodies {
		var req struct {
			Metadata map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatalf("the provider got %s: %v", b, err)
		}
		out = append(out, req.Metadata)
	}
	return out
}

// TestClientsCannotForgeSettlesMetadata: a client that puts Settle's own metadata keys in
// its request, naming someone else's operation, never gets them to the provider, whatever
// Settle knows of the provider's store: they are dropped before the body leaves, and only
// the values Settle sets for the call's own operation are sent. Otherwise the stored
// completion would carry the forged tag and a lookup of the other operation would take it
// as that operation's answer (ops rules 9 and 12).
func TestClientsCannotForgeSettlesMetadata(t *testing.T) {
	t.Parallel()
	victim := ops.NewOperationID()
	forged := func(store string) []byte {
		return []byte(`{"model":"fake-small","messages":[{"role":"user","content":"hi"}]` + store +
			`,"metadata":{"team":"support","settle_operation_id":"` + victim + `","settle_tenant":"7","Settle_Extra":"x"}}`)
	}
	cases := []struct {
		name         string
		mode         openai.StoreMode
		fake         fake.LLMOptions
		unknownStore bool
		body         []byte
	}{
		{name: "store off", mode: openai.StoreOff, body: forged(`,"store":true`)},
		{name: "store not known", mode: openai.StoreAuto, unknownStore: true, body: forged(`,"store":true`)},
		{name: "client said store false", mode: openai.StoreOn, body: forged(`,"store":false`)},
		{name: "tagged by Settle", mode: openai.StoreOn, body: forged("")},
		{name: "refused store, sent plain", mode: openai.StoreAuto, fake: fake.LLMOptions{RefuseStoreWrites: true}, body: forged("")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tc.fake.Seed = 1
			f, base := fakeLLM(t, tc.fake)
			spy, spied := spyOn(t, f, tc.unknownStore)
			c := client(t, spied, tc.mode)
			own := ops.NewOperationID()
			if r := c.Send(ctx, llm.Call{Body: tc.body, OperationID: own, TenantID: 9, Attempt: 1}); r.Outcome != ops.OutcomeOK {
				t.Fatalf("send: %+v", r)
			}
			sent := spy.metadata(t)
			if len(sent) == 0 {
				t.Fatal("nothing reached the provider")
			}
			for _, m := range sent {
				if m["team"] != "support" {
					t.Errorf("the client's own metadata was lost: %v", m)
				}
				for k, v := range m {
					settles := strings.HasPrefix(strings.ToLower(k), "settle_")
					if settles && !(k == llm.MetaOperation && v == own || k == llm.MetaTenant && v == "9") {
						t.Errorf("the provider got %s=%q from the client: %v", k, v, m)
					}
				}
			}
			reader := client(t, base, openai.StoreOn)
			if found, err := reader.FindStored(ctx, victim); err != nil || len(found) != 0 {
				t.Errorf("the provider stores %d completions tagged with the other operation (%v)", len(found), err)
			}
		})
	}
}
