package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/web"
)

// unknownCall is an llm_call to provider's route, left unknown after its attempt got no
// answer.
func (e *dashEnv) unknownCall(t *testing.T, provider, route, model string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	op := &ops.Operation{ID: ops.NewOperationID(), TenantID: e.tenant.ID, Kind: ops.KindLLMCall, Provider: provider,
		IntentKey: "idem-" + provider + route, ProviderKey: ops.NewProviderKey(), Fingerprint: "fp", ChatRef: "chat-" + route,
		Request: []byte(`{"policy":"interactive","route":"` + route + `","body":{"model":"` + model + `","input":"hi"}}`)}
	o, err := e.db.Open(ctx, ops.OpenParams{Op: op, Now: e.clock.Now(), Claim: "gw", LeaseUntil: e.clock.Now().Add(time.Second), Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.db.Transition(ctx, ops.TransitionParams{ID: o.Op.ID, Version: o.Op.Version, From: ops.StatusInProgress,
		To: ops.StatusUnknown, Now: e.clock.Now(), Actor: "gw", Action: "mark_unknown", Reason: "attempt timeout"})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// storeOn is an OpenAI-compatible provider that stores chat completions and holds none.
type storeOn struct{}

func (storeOn) Name() string                                             { return "openai" }
func (storeOn) StoreState(context.Context) llm.Store                     { return llm.StoreOn }
func (storeOn) FindStored(context.Context, string) ([]llm.Stored, error) { return nil, nil }
func (storeOn) GetStored(_ context.Context, id string) (*llm.Stored, error) {
	return nil, ops.Errorf(ops.ENOTFOUND, "no stored completion %s", id)
}

// TestPagesSayWhatEachAPIsRecordIs: the operation's page, its close form, its lookup and its
// close by hand say of a Messages or embeddings call only what Settle knows of that API
// (ops rule 12): no chat completion's wording and no "chatcmpl-" example, the record a person
// closes it with as that API names it (a message's id, the request id of an embeddings call,
// which has none of its own), that there is nothing to look up and that an on-call person
// settles it by hand, and that Settle cannot fetch its answer. A Responses call is named as a
// response. It holds on a server with a provider of stored completions and on one without.
func TestPagesSayWhatEachAPIsRecordIs(t *testing.T) {
	t.Parallel()
	for _, server := range []struct {
		name string
		wire []func(*web.Server, *testworld.World)
	}{
		{"no provider of stored completions", nil},
		{"a provider of stored completions", []func(*web.Server, *testworld.World){func(s *web.Server, tw *testworld.World) {
			d := s.Desk.(*desk.Desk)
			d.Completions = &llm.Lookups{Ledger: d.Ledger, Events: tw.DB, Store: storeOn{}, Prices: llm.DefaultPrices()}
		}}},
	} {
		t.Run(server.name, func(t *testing.T) {
			t.Parallel()
			e := newDashEnv(t, server.wire...)
			c := e.signIn(t, "oncall@example.com", desk.RoleOncall)
			for _, call := range []struct {
				provider, route, model string
				label, hint            string
				// says is what the page says of its lookup, and noFetch of the answer a
				// close by hand cannot fetch; empty where the API has a lookup.
				says, noFetch string
				noCompletion  bool
			}{
				{"anthropic", "/v1/messages", "claude-sonnet-4-5", "Message id", "msg_...",
					"Anthropic takes no idempotency key and has no lookup of a message", "Anthropic keeps no message Settle can read back", true},
				{"openai", "/v1/embeddings", "text-embedding-3-small", "Request id (embeddings have no id of their own)", "req_...",
					"There is nothing to look up for an embeddings call: openai gives its answer no id and keeps no copy of it", "", true},
				{"openai", "/v1/responses", "gpt-4.1-mini", "Response id", "resp_...", "", "", false},
			} {
				op := e.unknownCall(t, call.provider, call.route, call.model)
				_, page := e.page(t, c, "/ops/"+op.ID)
				form := between(t, page, `data-testid="close-form"`, `</form>`)
				mustContain(t, form, "<label>"+call.label+" (needed for succeeded", `placeholder="`+call.hint+`"`)
				mustNotContain(t, page, "chatcmpl-")
				if call.noCompletion && strings.Contains(strings.ToLower(page), "completion") {
					t.Errorf("%s: the page speaks of completions:\n%s", call.route, page)
				}
				if call.says == "" {
					continue
				}
				note := between(t, page, `data-testid="lookup-note"`, `</p>`)
				mustContain(t, note, call.says, "only a person settles it, someone with the on-call role who closes it by hand")
				mustNotContain(t, page, `data-testid="lookup-button"`)
				if call.noFetch != "" {
					mustContain(t, form, call.noFetch)
				}

				// A lookup asked anyway says the same, and how to close it by hand.
				e.post(t, c, "/ops/"+op.ID+"/lookup", url.Values{})
				_, page = e.page(t, c, "/ops/"+op.ID)
				mustContain(t, page, call.says, "close it as succeeded with", "("+call.hint+")")
				mustNotContain(t, page, "chatcmpl-")
				if strings.Contains(strings.ToLower(page), "completion") {
					t.Errorf("%s: the lookup's answer speaks of completions:\n%s", call.route, page)
				}

				// Succeeded needs the record as the API names it; given, the close keeps why
				// no answer was fetched.
				cur := e.get(t, op.ID)
				e.post(t, c, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(cur.Version)}, "to": {"succeeded"}, "note": {"billed, per the console"}})
				_, page = e.page(t, c, "/ops/"+op.ID)
				mustContain(t, page, "Succeeded needs the provider&#39;s record: give its id ("+call.hint+").")
				e.post(t, c, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(cur.Version)}, "to": {"succeeded"},
					"provider_ref": {strings.TrimSuffix(call.hint, "...") + "01abc"}, "note": {"billed, per the console"}})
				_, page = e.page(t, c, "/ops/"+op.ID)
				mustContain(t, page, "Closed as succeeded.", "Settle could not fetch its answer", call.says)
				mustNotContain(t, page, "chatcmpl-")
				if strings.Contains(strings.ToLower(page), "completion") {
					t.Errorf("%s: the closed page speaks of completions:\n%s", call.route, page)
				}
			}
		})
	}
}
