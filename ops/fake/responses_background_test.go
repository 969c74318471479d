package fake_test

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/settle-dev/settle/ops/fake"
)

// TestBackgroundBillThenTimeoutHoldsTheGeneration: bill_then_timeout on a background
// response answers the create call at once, queued and billed, and holds the generation past
// the rule's delay; the stream asked for sends its first event at once, then nothing until
// the hold ends; the response then completes as any other.
func TestBackgroundBillThenTimeoutHoldsTheGeneration(t *testing.T) {
	t.Parallel()
	// Every step below that must happen while the generation is held (the create call's
	// answer, a read of the response, the stream's first event) gets a second or more of the
	// hold to itself: with a 700 ms hold and 300-500 ms allowances a loaded machine could
	// have the hold end first.
	const hold = 4 * time.Second
	l, base := startLLM(t, fake.LLMOptions{ChunkDelay: time.Millisecond})
	l.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: hold, Times: 2})
	c := sdkFor(base)
	ctx := context.Background()
	bg := ask("summarise ticket 90")
	bg.Background = openai.Bool(true)
	start := time.Now()
	r, err := c.Responses.New(ctx, bg)
	// At once: the answer did not wait for the hold to end.
	if err != nil || r.Status != "queued" || time.Since(start) >= hold {
		t.Fatalf("created %v after %s: %v", r, time.Since(start), err)
	}
	// Still queued a while later: held, where a response without the fault runs at once.
	time.Sleep(hold / 4)
	if got, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil || got.Status != "queued" {
		t.Fatalf("held: %v %v", got, err)
	}
	// Asked as a stream: response.created at once, and nothing more while the hold lasts.
	tctx, cancel := context.WithTimeout(ctx, hold/2)
	defer cancel()
	st := c.Responses.NewStreaming(tctx, bg)
	head := readResponseStream(st.Next, st.Current, st.Err)
	if len(head.types) != 1 || head.types[0] != "response.created" || head.err == nil {
		t.Fatalf("the held stream sent %v, %v", head.types, head.err)
	}
	for deadline := time.Now().Add(hold + 10*time.Second); r.Status != "completed"; time.Sleep(20 * time.Millisecond) {
		if r, err = c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil || time.Now().After(deadline) {
			t.Fatalf("after the hold: %v %v", r, err)
		}
	}
	gens := l.GenerationsOf(fake.APIResponses)
	if len(gens) != 2 || gens[0].Fault != "bill_then_timeout" || r.OutputText() != gens[0].Content {
		t.Fatalf("ledger %+v, text %q", gens, r.OutputText())
	}
}

// TestResumedStreamFaults: a rule naming fake.ResumePath cuts a stream read again by GET, and
// only that: the create call it does not match is answered whole, and the stream read again
// after the cut resumes where the cut one stopped.
func TestResumedStreamFaults(t *testing.T) {
	t.Parallel()
	l, base := startLLM(t, fake.LLMOptions{ChunkDelay: time.Millisecond})
	l.AddFault(fake.LLMFault{Path: fake.ResumePath, Kind: fake.LLMFaultDropStream, Chunk: 3, Times: 1})
	c := sdkFor(base)
	ctx := context.Background()
	bg := ask("summarise ticket 91")
	bg.Background = openai.Bool(true)
	st := c.Responses.NewStreaming(ctx, bg)
	whole := readResponseStream(st.Next, st.Current, st.Err)
	if whole.err != nil || whole.types[len(whole.types)-1] != "response.completed" {
		t.Fatalf("the create stream: %v %v", whole.types, whole.err)
	}
	id := whole.response.ID
	g := c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(4)})
	cut := readResponseStream(g.Next, g.Current, g.Err)
	if cut.err == nil || len(cut.seqs) != 3 {
		t.Fatalf("the resumed stream: %v %v; want 3 events and a cut", cut.seqs, cut.err)
	}
	wantSequence(t, cut.seqs, 5)
	g = c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(7)})
	rest := readResponseStream(g.Next, g.Current, g.Err)
	if rest.err != nil || rest.types[len(rest.types)-1] != "response.completed" {
		t.Fatalf("read again: %v %v", rest.types, rest.err)
	}
	wantSequence(t, rest.seqs, 8)
	if n := len(l.GenerationsOf(fake.APIResponses)); n != 1 {
		t.Fatalf("%d generations", n)
	}
}
