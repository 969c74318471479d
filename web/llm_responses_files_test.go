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
)

// TestResponsesTakeTheFileTheirOwnItemCites: a client of the official SDK that ran
// code_interpreter hands its answer's message back as the next call's input, and the SDK
// sends it with the container_file_citation the provider wrote into it, file_id included.
// That is the tenant's own item as Settle kept it, so it goes through; the same item with
// another file id edited into its citation is answered 400 problem+json naming the file_id,
// with nothing generated (ops rule 12).
func TestResponsesTakeTheFileTheirOwnItemCites(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{})
	ctx := context.Background()
	shop := w.sdk("shop")
	p := respond("write it to a csv", "answer as support")
	p.Tools = []responses.ToolUnionParam{responses.ToolParamOfCodeInterpreter(responses.ToolCodeInterpreterContainerCodeInterpreterContainerAutoParam{})}
	first, err := shop.Responses.New(ctx, p, keyed("files-1"))
	if err != nil || len(first.Output) == 0 {
		t.Fatalf("shop's first response: %v %+v", err, first)
	}
	msg := first.Output[0].AsMessage()
	if len(msg.Content) == 0 || len(msg.Content[0].Annotations) == 0 || msg.Content[0].Annotations[0].FileID == "" {
		t.Fatalf("shop's answer cites no file: %+v", msg)
	}
	param := msg.ToParam()
	next := respond("and then?", "answer as support")
	next.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: []responses.ResponseInputItemUnionParam{
		{OfOutputMessage: &param}, responses.ResponseInputItemParamOfMessage("and then?", responses.EasyInputMessageRoleUser)}}
	if _, err := shop.Responses.New(ctx, next, keyed("files-own"), option.WithMaxRetries(0)); err != nil {
		t.Fatalf("shop handing back its own item citing %s: %v", msg.Content[0].Annotations[0].FileID, err)
	}
	sent := len(w.fake.GenerationsOf(fake.APIResponses))
	_, err = shop.Responses.New(ctx, next, keyed("files-edited"), option.WithMaxRetries(0),
		option.WithJSONSet("input.0.content.0.annotations.0.file_id", "file-0123456789abcdef"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("shop handing back its item with another file id: %v, want 400", err)
	}
	if body := string(apiErr.DumpResponse(true)); apiErr.StatusCode != http.StatusBadRequest ||
		!strings.Contains(body, "application/problem+json") || !strings.Contains(body, "input[0].content[0].annotations[0].file_id") {
		t.Errorf("shop handing back its item with another file id: %s, want 400 problem+json naming the file_id", body)
	}
	if n := len(w.fake.GenerationsOf(fake.APIResponses)); n != sent {
		t.Errorf("the provider generated %d responses from an edited item", n-sent)
	}
}
