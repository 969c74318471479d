package fake_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/settle-dev/settle/ops/fake"
)

func ask(q string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "fake-small", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q)},
		Metadata: shared.Metadata{"settle_operation_id": "op-1"}}
}

// streamed reads a Responses API stream to its end: the event types in order, the text of
// the deltas, the last response the events carried, and the stream's error.
type streamed struct {
	types    []string
	seqs     []int64
	text     string
	response responses.Response
	err      error
}

func readResponseStream(next func() bool, cur func() responses.ResponseStreamEventUnion, errf func() error) streamed {
	var s streamed
	for next() {
		e := cur()
		s.types = append(s.types, e.Type)
		s.seqs = append(s.seqs, e.SequenceNumber)
		switch e.Type {
		case "response.output_text.delta":
			s.text += e.Delta
		case "response.created", "response.in_progress", "response.completed", "response.failed":
			s.response = e.Response
		}
	}
	s.err = errf()
	return s
}

// wantSequence fails unless seqs count up by one from first.
func wantSequence(t *testing.T, seqs []int64, first int64) {
	t.Helper()
	for i, n := range seqs {
		if n != first+int64(i) {
			t.Fatalf("sequence numbers %v; want consecutive from %d", seqs, first)
		}
	}
}

// TestResponsesThroughTheSDK: the official SDK creates a response, streams the same
// question, and retrieves the stored one; the two generations are billed, a stream says
// what the plain answer says, and a response created with store: false is not kept.
func TestResponsesThroughTheSDK(t *testing.T) {
	t.Parallel()
	l, base := startLLM(t, fake.LLMOptions{ChunkDelay: time.Millisecond})
	c := sdkFor(base)
	ctx := context.Background()
	// Long enough for the repeated prompt to be cached (in blocks of 16 tokens).
	q := "where is order 4417, the customer wrote twice about it and asked for the refund to go back to the card they paid with"
	whole, err := c.Responses.New(ctx, ask(q))
	if err != nil {
		t.Fatal(err)
	}
	u := whole.Usage
	if whole.Status != "completed" || !strings.HasPrefix(whole.ID, "resp_") || whole.OutputText() == "" ||
		u.OutputTokens != 24 || u.InputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens ||
		whole.Metadata["settle_operation_id"] != "op-1" {
		t.Fatalf("response %s", whole.RawJSON())
	}
	st := c.Responses.NewStreaming(ctx, ask(q))
	s := readResponseStream(st.Next, st.Current, st.Err)
	if s.err != nil {
		t.Fatal(s.err)
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	for range 24 {
		want = append(want, "response.output_text.delta")
	}
	want = append(want, "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed")
	if strings.Join(s.types, " ") != strings.Join(want, " ") {
		t.Fatalf("events %v", s.types)
	}
	wantSequence(t, s.seqs, 0)
	if s.text != whole.OutputText() || s.response.OutputText() != s.text || s.response.Usage.OutputTokens != 24 ||
		s.response.Usage.InputTokensDetails.CachedTokens != u.InputTokens&^15 || u.InputTokens < 16 {
		t.Fatalf("streamed %q (usage %+v), plain %q", s.text, s.response.Usage, whole.OutputText())
	}

	got, err := c.Responses.Get(ctx, whole.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != whole.OutputText() || got.Metadata["settle_operation_id"] != "op-1" || got.Status != "completed" {
		t.Fatalf("retrieved %v: %v", got, err)
	}
	unstored := ask("do not keep this")
	unstored.Store = openai.Bool(false)
	gone, err := c.Responses.New(ctx, unstored)
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	if _, err := c.Responses.Get(ctx, gone.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("a response created with store: false was retrieved: %v", err)
	}
	if gens := l.GenerationsOf(fake.APIResponses); len(gens) != 3 || gens[0].ID != whole.ID || !gens[0].Stored || gens[2].Stored {
		t.Fatalf("ledger %+v", gens)
	}
	if n := len(l.GenerationsOf(fake.APIChatCompletions)); n != 0 {
		t.Fatalf("%d chat completions billed", n)
	}
}

// TestResponsesBackgroundResumes: a background response is created queued, generated
// behind the answer and polled to completion; when its stream is cut, the stream resumes
// after the last sequence number seen and the text is whole, from one generation.
func TestResponsesBackgroundResumes(t *testing.T) {
	t.Parallel()
	l, base := startLLM(t, fake.LLMOptions{ChunkDelay: 10 * time.Millisecond})
	c := sdkFor(base)
	ctx := context.Background()
	bg := ask("summarise ticket 88")
	bg.Background = openai.Bool(true)
	r, err := c.Responses.New(ctx, bg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "queued" || !r.Background || len(r.Output) != 0 {
		t.Fatalf("created %s", r.RawJSON())
	}
	deadline := time.Now().Add(10 * time.Second)
	seen := map[responses.ResponseStatus]bool{}
	for r.Status != "completed" && time.Now().Before(deadline) {
		if r, err = c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil {
			t.Fatal(err)
		}
		seen[r.Status] = true
		time.Sleep(10 * time.Millisecond)
	}
	if r.Status != "completed" || !seen["in_progress"] || r.OutputText() == "" {
		t.Fatalf("polled %v to %s", seen, r.RawJSON())
	}
	replay := c.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{StartingAfter: openai.Int(20)})
	tail := readResponseStream(replay.Next, replay.Current, replay.Err)
	if tail.err != nil || len(tail.seqs) == 0 || tail.types[len(tail.types)-1] != "response.completed" {
		t.Fatalf("replay %v: %v", tail.types, tail.err)
	}
	wantSequence(t, tail.seqs, 21)
	// The same replay asked for in the query, as OpenAI documents it.
	req, _ := http.NewRequest(http.MethodGet, base+"/responses/"+r.ID+"?stream=true&starting_after=20", nil)
	req.Header.Set("Authorization", "Bearer "+llmKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := events(t, resp.Body)
	resp.Body.Close()
	if err != nil || len(data) != len(tail.seqs) || !strings.Contains(data[0], `"sequence_number":21`) {
		t.Fatalf("replay by query: %q, %v", data, err)
	}

	// The stream of a second background response drops after 6 events; the rest comes by
	// resuming after the sixth (sequence number 5), while it is still being generated.
	l.AddFault(fake.LLMFault{Kind: fake.LLMFaultDropStream, Chunk: 6, Times: 1})
	bg.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("summarise ticket 89")}
	st := c.Responses.NewStreaming(ctx, bg)
	head := readResponseStream(st.Next, st.Current, st.Err)
	if head.err == nil || len(head.seqs) != 6 {
		t.Fatalf("got %v, %v; want 6 events and a broken stream", head.types, head.err)
	}
	id := head.response.ID
	rest := c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(5)})
	tail = readResponseStream(rest.Next, rest.Current, rest.Err)
	if tail.err != nil || tail.types[len(tail.types)-1] != "response.completed" {
		t.Fatalf("resumed %v: %v", tail.types, tail.err)
	}
	wantSequence(t, tail.seqs, 6)
	if head.text+tail.text != tail.response.OutputText() || tail.response.Status != "completed" {
		t.Fatalf("pieces %q + %q, final %q", head.text, tail.text, tail.response.OutputText())
	}
	if gens := l.GenerationsOf(fake.APIResponses); len(gens) != 2 || gens[1].ID != id || gens[1].Fault != "drop_stream" {
		t.Fatalf("ledger %+v", gens)
	}
	// A response that was not created in the background is not streamed again.
	plain, err := c.Responses.New(ctx, ask("plain"))
	if err != nil {
		t.Fatal(err)
	}
	again := c.Responses.GetStreaming(ctx, plain.ID, responses.ResponseGetParams{})
	if again.Next() || again.Err() == nil {
		t.Fatal("a foreground response was streamed again")
	}
}

// TestResponsesFaults: the fault rules of the fake LLM strike the Responses API alike, and
// the ledger says which of them were billed.
func TestResponsesFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("refusals before generation are not billed", func(t *testing.T) {
		t.Parallel()
		var apiErr *openai.Error
		l, base := startLLM(t, fake.LLMOptions{})
		faults, err := fake.ParseLLMFaults("/v1/responses rate_limit calls=1 retry_after=4; /v1/responses server_error calls=2; /v1/responses overloaded calls=3")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range faults {
			l.AddFault(f)
		}
		c := sdkFor(base)
		for _, want := range []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable} {
			_, err := c.Responses.New(ctx, ask("x"))
			if !errors.As(err, &apiErr) || apiErr.StatusCode != want {
				t.Fatalf("got %v, want %d", err, want)
			}
			if want == http.StatusTooManyRequests && apiErr.Response.Header.Get("Retry-After") != "4" {
				t.Fatalf("Retry-After %q", apiErr.Response.Header.Get("Retry-After"))
			}
		}
		if n := len(l.GenerationsOf(fake.APIResponses)); n != 0 {
			t.Fatalf("%d generations billed", n)
		}
	})
	t.Run("a server error part-way fails the stream and the stored response, billed", func(t *testing.T) {
		t.Parallel()
		l, base := startLLM(t, fake.LLMOptions{})
		l.AddFault(fake.LLMFault{Kind: fake.LLMFaultServerError, Chunk: 5})
		c := sdkFor(base)
		st := c.Responses.NewStreaming(ctx, ask("x"))
		s := readResponseStream(st.Next, st.Current, st.Err)
		if s.err != nil || len(s.types) != 7 || s.types[5] != "error" || s.types[6] != "response.failed" || s.response.Status != "failed" {
			t.Fatalf("events %v, %v", s.types, s.err)
		}
		wantSequence(t, s.seqs, 0)
		got, err := c.Responses.Get(ctx, s.response.ID, responses.ResponseGetParams{})
		if err != nil || got.Status != "failed" || got.Error.Code != "server_error" {
			t.Fatalf("stored %v: %v", got, err)
		}
		if gens := l.GenerationsOf(fake.APIResponses); len(gens) != 1 || gens[0].Fault != "server_error" {
			t.Fatalf("ledger %+v", gens)
		}
	})
	t.Run("bill then timeout keeps the response for a lookup after its store lag", func(t *testing.T) {
		t.Parallel()
		var apiErr *openai.Error
		clock := newTestClock()
		l, base := startLLM(t, fake.LLMOptions{Clock: clock.Now})
		l.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: 5 * time.Second, Lag: time.Minute, Times: 1})
		c := sdkFor(base)
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if _, err := c.Responses.New(tctx, ask("x")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the client's timeout", err)
		}
		gens := billedSoon(func() []fake.Generation { return l.GenerationsOf(fake.APIResponses) }, 1)
		if len(gens) != 1 || gens[0].Fault != "bill_then_timeout" {
			t.Fatalf("ledger %+v", gens)
		}
		if _, err := c.Responses.Get(ctx, gens[0].ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Fatalf("visible before its store lag: %v", err)
		}
		clock.Advance(time.Minute)
		if got, err := c.Responses.Get(ctx, gens[0].ID, responses.ResponseGetParams{}); err != nil || got.OutputText() != gens[0].Content {
			t.Fatalf("after the lag: %v, %v", got, err)
		}
	})
}

// TestResponsesForcedFunctionCall: a forced function call is answered with a function_call
// item, streamed as argument deltas.
func TestResponsesForcedFunctionCall(t *testing.T) {
	t.Parallel()
	_, base := startLLM(t, fake.LLMOptions{})
	c := sdkFor(base)
	p := ask("refund order 3")
	p.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "refund", Parameters: map[string]any{"type": "object"}}}}
	p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}
	r, err := c.Responses.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Output) != 1 || r.Output[0].Type != "function_call" || r.Output[0].Name != "refund" || !strings.HasPrefix(r.Output[0].Arguments.OfString, `{"note":`) {
		t.Fatalf("output %s", r.RawJSON())
	}
	st := c.Responses.NewStreaming(context.Background(), p, option.WithMaxRetries(0))
	args := ""
	for st.Next() {
		if e := st.Current(); e.Type == "response.function_call_arguments.delta" {
			args += e.Delta
		}
	}
	if st.Err() != nil || args != r.Output[0].Arguments.OfString {
		t.Fatalf("streamed arguments %q, want %q (%v)", args, r.Output[0].Arguments.OfString, st.Err())
	}
}
