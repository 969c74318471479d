package fake_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/settle-dev/settle/ops/fake"
)

// fakeTime is a clock the test moves.
type fakeTime struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeTime) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeTime) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func sdkFor(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey(llmKey), option.WithMaxRetries(0))
}

func storedAsk(q, opID string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "fake-small", Store: openai.Bool(true),
		Metadata: shared.Metadata{"settle_operation_id": opID, "settle_tenant": "7"},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)}}
}

func byOperation(opID string) openai.ChatCompletionListParams {
	return openai.ChatCompletionListParams{Metadata: shared.Metadata{"settle_operation_id": opID}}
}

// TestLLMStoredCompletions: a completion created with store: true is listed by its
// metadata and retrieved by id, through the official SDK, until its retention ends; one
// created without store is not kept.
func TestLLMStoredCompletions(t *testing.T) {
	t.Parallel()
	clock := &fakeTime{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l, base := startLLM(t, fake.LLMOptions{Seed: 1, Clock: clock.Now, StoreRetention: 48 * time.Hour})
	c := sdkFor(base)
	ctx := context.Background()
	a, err := c.Chat.Completions.New(ctx, storedAsk("where is order 1", "op-a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chat.Completions.New(ctx, storedAsk("where is order 2", "op-b")); err != nil {
		t.Fatal(err)
	}
	plain := openai.ChatCompletionNewParams{Model: "fake-small", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("where is order 1")}}
	p, err := c.Chat.Completions.New(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	if p.Choices[0].Message.Content != a.Choices[0].Message.Content {
		t.Fatalf("storing changed the answer: %q vs %q", p.Choices[0].Message.Content, a.Choices[0].Message.Content)
	}
	page, err := c.Chat.Completions.List(ctx, byOperation("op-a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != a.ID || page.Data[0].Metadata["settle_operation_id"] != "op-a" ||
		page.Data[0].Choices[0].Message.Content != a.Choices[0].Message.Content {
		t.Fatalf("list by metadata: %s", page.RawJSON())
	}
	all, err := c.Chat.Completions.List(ctx, openai.ChatCompletionListParams{Limit: openai.Int(1)})
	if err != nil || len(all.Data) != 1 || !all.HasMore {
		t.Fatalf("first page of all: %v %+v", err, all)
	}
	n := 0
	for it := c.Chat.Completions.ListAutoPaging(ctx, openai.ChatCompletionListParams{Limit: openai.Int(1)}); it.Next(); {
		n++
	}
	if n != 2 {
		t.Fatalf("paging listed %d stored completions, want 2 (the plain one is not stored)", n)
	}
	got, err := c.Chat.Completions.Get(ctx, a.ID)
	if err != nil || got.ID != a.ID || got.Usage.TotalTokens != a.Usage.TotalTokens {
		t.Fatalf("retrieve: %v %+v", err, got)
	}
	if _, err := c.Chat.Completions.Get(ctx, p.ID); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("retrieving a completion that was not stored: %v", err)
	}
	if g := l.Generations(); len(g) != 3 || !g[0].Stored || g[2].Stored || g[0].Metadata["settle_tenant"] != "7" {
		t.Fatalf("generations %+v", g)
	}
	clock.Advance(49 * time.Hour)
	if page, err := c.Chat.Completions.List(ctx, byOperation("op-a")); err != nil || len(page.Data) != 0 {
		t.Fatalf("past its retention the completion is still listed: %v %+v", err, page)
	}
	if _, err := c.Chat.Completions.Get(ctx, a.ID); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("past its retention: %v", err)
	}
}

// TestLLMBillThenTimeoutIsStoredLate: the provider bills and stores the completion, the
// client times out, and the stored copy shows only after the rule's lag.
func TestLLMBillThenTimeoutIsStoredLate(t *testing.T) {
	t.Parallel()
	clock := &fakeTime{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l, base := startLLM(t, fake.LLMOptions{Seed: 1, Clock: clock.Now})
	faults, err := fake.ParseLLMFaults("bill_then_timeout calls=1 delay=5s lag=30s")
	if err != nil {
		t.Fatal(err)
	}
	l.AddFault(faults[0])
	c := sdkFor(base)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Chat.Completions.New(ctx, storedAsk("summarise doc 9", "op-9")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the client did not time out: %v", err)
	}
	if g := billedSoon(l.Generations, 1); len(g) != 1 || !g[0].Stored {
		t.Fatalf("billed %+v", g)
	}
	list := func() int {
		page, err := c.Chat.Completions.List(context.Background(), byOperation("op-9"))
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Data)
	}
	if n := list(); n != 0 {
		t.Fatalf("visible before the lag: %d", n)
	}
	clock.Advance(31 * time.Second)
	if n := list(); n != 1 {
		t.Fatalf("after the lag %d stored completions, want 1", n)
	}
}

// TestLLMWithoutStoredCompletions: a provider without them refuses store and metadata
// before billing, and has no list.
func TestLLMWithoutStoredCompletions(t *testing.T) {
	t.Parallel()
	l, base := startLLM(t, fake.LLMOptions{Seed: 1, NoStore: true})
	c := sdkFor(base)
	ctx := context.Background()
	if _, err := c.Chat.Completions.New(ctx, storedAsk("hello", "op-1")); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("store was accepted: %v", err)
	}
	if _, err := c.Chat.Completions.List(ctx, byOperation("op-1")); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("list: %v", err)
	}
	if g := l.Generations(); len(g) != 0 {
		t.Fatalf("a refused request was billed: %+v", g)
	}
}

func isStatus(err error, status int) bool {
	var e *openai.Error
	return errors.As(err, &e) && e.StatusCode == status
}
