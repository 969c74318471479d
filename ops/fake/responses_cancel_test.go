package fake_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/settle-dev/settle/ops/fake"
)

// TestCancelBackgroundResponse: the fake cancels a background response as OpenAI does. One in
// progress stops where it is: its stream ends with no event after the cancel, it stays
// cancelled, and its generation is billed for the prompt and the output so far. One still
// queued is billed nothing and is never generated. A second cancel answers the cancelled
// response again; a completed response, or one created without background mode, is refused
// with 400; an unknown id is 404. Every cancel is counted.
func TestCancelBackgroundResponse(t *testing.T) {
	t.Parallel()
	l, base := startLLM(t, fake.LLMOptions{ChunkDelay: 20 * time.Millisecond})
	c := sdkFor(base)
	ctx := context.Background()
	gen := func(id string) fake.Generation {
		for _, g := range l.GenerationsOf(fake.APIResponses) {
			if g.ID == id {
				return g
			}
		}
		t.Fatalf("no generation %s", id)
		return fake.Generation{}
	}

	bg := ask("summarise ticket 92")
	bg.Background = openai.Bool(true)
	st := c.Responses.NewStreaming(ctx, bg)
	var id string
	var deltas int
	cancelled := false
	for st.Next() {
		e := st.Current()
		if e.Type == "response.created" {
			id = e.Response.ID
		}
		if e.Type == "response.output_text.delta" {
			if deltas++; deltas == 3 && !cancelled {
				got, err := c.Responses.Cancel(ctx, id)
				if err != nil || got.Status != "cancelled" || got.Usage.OutputTokens < 3 {
					t.Fatalf("cancel in progress: %v %+v", err, got)
				}
				cancelled = true
			}
		}
		if strings.HasPrefix(e.Type, "response.completed") {
			t.Fatalf("the cancelled response completed")
		}
	}
	if err := st.Err(); err != nil || !cancelled {
		t.Fatalf("the stream of the cancelled response: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	g := gen(id)
	got, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || got.Status != "cancelled" || int64(g.CompletionTokens) != got.Usage.OutputTokens || g.PromptTokens == 0 || g.CompletionTokens >= 24 {
		t.Fatalf("after the cancel: %v %+v; billed %+v", err, got, g)
	}
	again, err := c.Responses.Cancel(ctx, id)
	if err != nil || again.Status != "cancelled" || gen(id).CompletionTokens != g.CompletionTokens {
		t.Fatalf("cancelled again: %v %+v", err, again)
	}

	l.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 300 * time.Millisecond, Times: 1})
	queued, err := c.Responses.New(ctx, bg)
	if err != nil || queued.Status != "queued" {
		t.Fatalf("queued: %v %+v", err, queued)
	}
	if got, err := c.Responses.Cancel(ctx, queued.ID); err != nil || got.Status != "cancelled" || got.Usage.TotalTokens != 0 {
		t.Fatalf("cancel while queued: %v %+v", err, got)
	}
	time.Sleep(500 * time.Millisecond)
	if got, err := c.Responses.Get(ctx, queued.ID, responses.ResponseGetParams{}); err != nil || got.Status != "cancelled" {
		t.Fatalf("past its hold: %v %+v", err, got)
	}
	if g := gen(queued.ID); g.PromptTokens != 0 || g.CompletionTokens != 0 {
		t.Fatalf("the queued response billed %+v", g)
	}

	done, err := c.Responses.New(ctx, ask("summarise ticket 93"))
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	for _, x := range []struct {
		id     string
		status int
	}{{done.ID, http.StatusBadRequest}, {"resp_none", http.StatusNotFound}} {
		if _, err := c.Responses.Cancel(ctx, x.id); !errors.As(err, &apiErr) || apiErr.StatusCode != x.status {
			t.Fatalf("cancel %s: %v", x.id, err)
		}
	}
	completed := ask("summarise ticket 94")
	completed.Background = openai.Bool(true)
	r, err := c.Responses.New(ctx, completed)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); r.Status != "completed"; time.Sleep(20 * time.Millisecond) {
		if r, err = c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil || time.Now().After(deadline) {
			t.Fatalf("completing: %v %v", r, err)
		}
	}
	if _, err := c.Responses.Cancel(ctx, r.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Fatalf("cancel of a completed response: %v", err)
	}
	if n := len(l.Cancels()); n != 6 {
		t.Fatalf("the fake counted %d cancels, want 6", n)
	}
}
