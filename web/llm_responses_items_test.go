package web_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

// TestResponsesTakeOnlyTheTenantsOwnItems: a client of the official SDK that keeps its own
// context hands a response's output back as the next call's input, each item with its id,
// which the provider reads from its store. Its own items go through; the same input sent by
// another tenant, which would have the provider read the first tenant's stored items, is
// answered 400 problem+json naming the item, with nothing generated (ops rule 12), as is an
// item_reference to them.
func TestResponsesTakeOnlyTheTenantsOwnItems(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{})
	ctx := context.Background()
	shop, bank := w.sdk("shop"), w.sdk("bank")
	first, err := shop.Responses.New(ctx, respond("my card ends 4242", "answer as support"), keyed("items-1"))
	if err != nil || len(first.Output) == 0 {
		t.Fatalf("shop's first response: %v %+v", err, first)
	}
	msg := first.Output[0].AsMessage().ToParam()
	next := func(items ...responses.ResponseInputItemUnionParam) responses.ResponseNewParams {
		p := respond("and then?", "answer as support")
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: append(items,
			responses.ResponseInputItemParamOfMessage("and then?", responses.EasyInputMessageRoleUser))}
		return p
	}
	handedBack := next(responses.ResponseInputItemUnionParam{OfOutputMessage: &msg})
	referenced := next(responses.ResponseInputItemParamOfItemReference(first.Output[0].ID))
	sent := len(w.fake.GenerationsOf(fake.APIResponses))
	for i, c := range []struct {
		params responses.ResponseNewParams
		field  string
	}{{handedBack, "input[0].id"}, {referenced, "input[0] (item_reference) id"}} {
		_, err := bank.Responses.New(ctx, c.params, keyed("steal-"+string(rune('a'+i))))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("bank handing back shop's item by %s: %v, want 400 naming it", c.field, err)
		}
		if body := string(apiErr.DumpResponse(true)); apiErr.StatusCode != http.StatusBadRequest ||
			!strings.Contains(body, "application/problem+json") || !strings.Contains(body, `"code":"`+llm.ReasonInvalidRequest+`"`) || !strings.Contains(body, c.field) {
			t.Errorf("bank handing back shop's item by %s: %s, want 400 problem+json naming it", c.field, body)
		}
	}
	if n := len(w.fake.GenerationsOf(fake.APIResponses)); n != sent {
		t.Fatalf("the provider generated %d responses from another tenant's items", n-sent)
	}
	for i, p := range []responses.ResponseNewParams{handedBack, referenced} {
		if _, err := shop.Responses.New(ctx, p, keyed("own-"+string(rune('a'+i))), option.WithMaxRetries(0)); err != nil {
			t.Errorf("shop handing back its own item: %v", err)
		}
	}
}
