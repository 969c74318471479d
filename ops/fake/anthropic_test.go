package fake_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/settle-dev/settle/ops/fake"
)

const (
	anthropicKey   = "sk-ant-api03-fake-test"
	anthropicAdmin = "sk-ant-admin01-fake-test"
)

func startAnthropic(t *testing.T, opts fake.AnthropicOptions) (*fake.Anthropic, string) {
	t.Helper()
	a := fake.NewAnthropic(opts)
	base, err := a.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a, base
}

func anthropicSDK(base string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{aoption.WithBaseURL(base), aoption.WithAPIKey(anthropicKey),
		aoption.WithMaxRetries(0)}, opts...)...)
}

// cachedAsk is a question behind a long system prompt marked for the prompt cache.
func cachedAsk(q string) anthropic.MessageNewParams {
	system := strings.Repeat("You answer customers of the shop about their orders and refunds. ", 8)
	return anthropic.MessageNewParams{Model: "claude-fake-4", MaxTokens: 1024,
		System:   []anthropic.TextBlockParam{{Text: system, CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))}}
}

// TestAnthropicMessagesThroughTheSDK: the official SDK creates a message, again from the
// prompt cache, and streams it; the stream says what the plain answer says, the usage
// counts the cache's writes and reads apart, and the fake saw the headers the SDK sent.
func TestAnthropicMessagesThroughTheSDK(t *testing.T) {
	t.Parallel()
	a, base := startAnthropic(t, fake.AnthropicOptions{ChunkDelay: time.Millisecond})
	c := anthropicSDK(base, aoption.WithHeader("anthropic-version", "2023-06-01"),
		aoption.WithHeader("anthropic-beta", "extended-cache-ttl-2025-04-11"))
	ctx := context.Background()
	first, err := c.Messages.New(ctx, cachedAsk("where is order 4417"))
	if err != nil {
		t.Fatal(err)
	}
	u := first.Usage
	if !strings.HasPrefix(first.ID, "msg_") || first.StopReason != anthropic.StopReasonEndTurn || len(first.Content) != 1 ||
		first.Content[0].Text == "" || u.OutputTokens != 24 || u.InputTokens == 0 || u.CacheCreationInputTokens < 80 ||
		u.CacheReadInputTokens != 0 || u.CacheCreation.Ephemeral5mInputTokens != u.CacheCreationInputTokens {
		t.Fatalf("message %s", first.RawJSON())
	}
	second, err := c.Messages.New(ctx, cachedAsk("where is order 4417"))
	if err != nil {
		t.Fatal(err)
	}
	if second.Usage.CacheReadInputTokens != u.CacheCreationInputTokens || second.Usage.CacheCreationInputTokens != 0 ||
		second.Usage.InputTokens != u.InputTokens || second.Content[0].Text != first.Content[0].Text {
		t.Fatalf("repeat %s", second.RawJSON())
	}

	st := c.Messages.NewStreaming(ctx, cachedAsk("where is order 4417"))
	var acc anthropic.Message
	var types []string
	for st.Next() {
		e := st.Current()
		types = append(types, e.Type)
		if err := acc.Accumulate(e); err != nil {
			t.Fatal(err)
		}
	}
	if st.Err() != nil {
		t.Fatal(st.Err())
	}
	want := "message_start content_block_start" + strings.Repeat(" content_block_delta", 24) + " content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v", types)
	}
	if acc.Content[0].Text != first.Content[0].Text || acc.StopReason != anthropic.StopReasonEndTurn || acc.Usage.OutputTokens != 24 ||
		acc.Usage.CacheReadInputTokens != u.CacheCreationInputTokens {
		t.Fatalf("streamed %+v", acc)
	}

	gens := a.Generations()
	if len(gens) != 3 || gens[0].ID != first.ID || gens[0].APIKeyID != fake.AnthropicKeyID(anthropicKey) || !gens[2].Stream ||
		gens[0].AnthropicVersion != "2023-06-01" || gens[0].AnthropicBeta != "extended-cache-ttl-2025-04-11" {
		t.Fatalf("ledger %+v", gens)
	}
	reqs := a.Requests()
	if len(reqs) != 3 || reqs[0].Header.Get("Anthropic-Version") != "2023-06-01" || reqs[0].Header.Get("Anthropic-Beta") == "" ||
		reqs[0].Header.Get("X-Api-Key") != "" {
		t.Fatalf("requests %+v", reqs)
	}
}

// TestAnthropicBearerToolsAndMaxTokens: a bearer token authenticates as an API key does, a
// forced tool call is answered with a tool_use block (streamed as JSON deltas), and a
// small max_tokens cuts the answer with stop_reason max_tokens.
func TestAnthropicBearerToolsAndMaxTokens(t *testing.T) {
	t.Parallel()
	a, base := startAnthropic(t, fake.AnthropicOptions{})
	c := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAuthToken("bearer-token"), aoption.WithMaxRetries(0))
	ctx := context.Background()
	p := cachedAsk("refund order 3")
	p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "refund", InputSchema: anthropic.ToolInputSchemaParam{}}}}
	p.ToolChoice = anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: "refund"}}
	m, err := c.Messages.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if m.StopReason != anthropic.StopReasonToolUse || m.Content[0].Type != "tool_use" || m.Content[0].Name != "refund" ||
		!strings.HasPrefix(string(m.Content[0].Input), `{"note":`) {
		t.Fatalf("message %s", m.RawJSON())
	}
	st := c.Messages.NewStreaming(ctx, p)
	var acc anthropic.Message
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if st.Err() != nil || string(acc.Content[0].Input) != string(m.Content[0].Input) {
		t.Fatalf("streamed input %s, want %s (%v)", acc.Content[0].Input, m.Content[0].Input, st.Err())
	}
	short := cachedAsk("x")
	short.MaxTokens = 5
	if m, err = c.Messages.New(ctx, short); err != nil || m.StopReason != anthropic.StopReasonMaxTokens || m.Usage.OutputTokens != 5 {
		t.Fatalf("max_tokens 5: %v %v", m, err)
	}
	if gens := a.Generations(); len(gens) != 3 || gens[0].APIKeyID != fake.AnthropicKeyID("bearer-token") {
		t.Fatalf("ledger %+v", gens)
	}
}

// TestAnthropicRefusesBadRequestsWithoutBilling: a missing key or anthropic-version, an
// Admin API key, a missing max_tokens and a metadata key other than user_id are refused
// before anything is billed.
func TestAnthropicRefusesBadRequestsWithoutBilling(t *testing.T) {
	t.Parallel()
	a, base := startAnthropic(t, fake.AnthropicOptions{})
	body := `{"model":"claude-fake-4","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, key, version, body string
		want                     int
	}{
		{"no key", "", "2023-06-01", body, http.StatusUnauthorized},
		{"admin key", anthropicAdmin, "2023-06-01", body, http.StatusUnauthorized},
		{"no version", anthropicKey, "", body, http.StatusBadRequest},
		{"no max_tokens", anthropicKey, "2023-06-01", `{"model":"claude-fake-4","messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest},
		{"metadata", anthropicKey, "2023-06-01", strings.Replace(body, `"messages"`, `"metadata":{"op":"1"},"messages"`, 1), http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(tc.body))
		if tc.key != "" {
			req.Header.Set("x-api-key", tc.key)
		}
		if tc.version != "" {
			req.Header.Set("anthropic-version", tc.version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want || resp.Header.Get("request-id") == "" {
			t.Errorf("%s: %d (request-id %q), want %d", tc.name, resp.StatusCode, resp.Header.Get("request-id"), tc.want)
		}
	}
	if n := len(a.Generations()); n != 0 {
		t.Fatalf("%d generations billed", n)
	}
}

// TestAnthropicFaults: the fake LLM's fault rules strike the Messages API alike, with 529
// overloaded_error as Anthropic's own, and the ledger says which of them were billed.
func TestAnthropicFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("refusals before generation are not billed", func(t *testing.T) {
		t.Parallel()
		var apiErr *anthropic.Error
		a, base := startAnthropic(t, fake.AnthropicOptions{})
		faults, err := fake.ParseLLMFaults("/v1/messages overloaded calls=1; /v1/messages rate_limit calls=2 retry_after=3; server_error calls=3")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range faults {
			a.AddFault(f)
		}
		c := anthropicSDK(base)
		for _, want := range []int{529, http.StatusTooManyRequests, http.StatusInternalServerError} {
			_, err := c.Messages.New(ctx, cachedAsk("x"))
			if !errors.As(err, &apiErr) || apiErr.StatusCode != want {
				t.Fatalf("got %v, want %d", err, want)
			}
			if want == 529 && !strings.Contains(apiErr.RawJSON(), "overloaded_error") {
				t.Fatalf("529 body %s", apiErr.RawJSON())
			}
			if want == http.StatusTooManyRequests && apiErr.Response.Header.Get("Retry-After") != "3" {
				t.Fatalf("Retry-After %q", apiErr.Response.Header.Get("Retry-After"))
			}
		}
		if n := len(a.Generations()); n != 0 {
			t.Fatalf("%d generations billed", n)
		}
	})
	t.Run("streams cut or broken off part-way are billed", func(t *testing.T) {
		t.Parallel()
		a, base := startAnthropic(t, fake.AnthropicOptions{})
		a.AddFault(fake.LLMFault{Kind: fake.LLMFaultOverloaded, Chunk: 4, Calls: []int{1}})
		a.AddFault(fake.LLMFault{Kind: fake.LLMFaultDropStream, Chunk: 3, Calls: []int{2}})
		c := anthropicSDK(base)
		for i, want := range []string{"overloaded_error", "EOF"} {
			st := c.Messages.NewStreaming(ctx, cachedAsk("x"))
			n := 0
			for st.Next() {
				n++
			}
			if st.Err() == nil || !strings.Contains(st.Err().Error(), want) {
				t.Fatalf("stream %d: %d events then %v; want %s", i+1, n, st.Err(), want)
			}
		}
		if gens := a.Generations(); len(gens) != 2 || gens[0].Fault != "overloaded" || gens[1].Fault != "drop_stream" {
			t.Fatalf("ledger %+v", gens)
		}
	})
	t.Run("bill then timeout", func(t *testing.T) {
		t.Parallel()
		a, base := startAnthropic(t, fake.AnthropicOptions{})
		a.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: 5 * time.Second})
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		c := anthropicSDK(base)
		if _, err := c.Messages.New(tctx, cachedAsk("x")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the client's timeout", err)
		}
		if gens := billedSoon(a.Generations, 1); len(gens) != 1 || gens[0].Fault != "bill_then_timeout" {
			t.Fatalf("ledger %+v", gens)
		}
	})
}

// usagePage is the Admin API's messages usage report.
type usagePage struct {
	Data []struct {
		StartingAt string `json:"starting_at"`
		EndingAt   string `json:"ending_at"`
		Results    []struct {
			UncachedInputTokens int `json:"uncached_input_tokens"`
			CacheCreation       struct {
				Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
				Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
			} `json:"cache_creation"`
			CacheReadInputTokens int     `json:"cache_read_input_tokens"`
			OutputTokens         int     `json:"output_tokens"`
			Model                *string `json:"model"`
			APIKeyID             *string `json:"api_key_id"`
		} `json:"results"`
	} `json:"data"`
	HasMore  bool    `json:"has_more"`
	NextPage *string `json:"next_page"`
}

func usageReport(t *testing.T, base, key, query string) (usagePage, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/organizations/usage_report/messages?"+query, nil)
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page usagePage
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			t.Fatal(err)
		}
	}
	return page, resp.StatusCode
}

// TestAnthropicUsageReport: the Admin API's usage report counts every billed message in its
// minute, per model and API key when grouped so, the cache's writes and reads apart, once
// the message's report lag has passed; it pages by bucket and takes only an admin key.
func TestAnthropicUsageReport(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	a, base := startAnthropic(t, fake.AnthropicOptions{Clock: clock.Now})
	ctx := context.Background()
	ca, cb := anthropicSDK(base), anthropicSDK(base, aoption.WithAPIKey("sk-ant-api03-other"))
	for _, c := range []anthropic.Client{ca, ca, cb} {
		if _, err := c.Messages.New(ctx, cachedAsk("where is order 4417")); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)
	a.AddFault(fake.LLMFault{Kind: fake.LLMFaultStoreLag, Delay: 5 * time.Minute, Times: 1})
	if _, err := ca.Messages.New(ctx, cachedAsk("and order 4418")); err != nil {
		t.Fatal(err)
	}
	g := a.Generations()
	const window = "starting_at=2026-03-01T12:00:00Z&ending_at=2026-03-01T12:03:00Z&bucket_width=1m"
	page, status := usageReport(t, base, anthropicAdmin, window+"&group_by[]=model&group_by[]=api_key_id")
	if status != http.StatusOK || len(page.Data) != 3 || page.HasMore || page.NextPage != nil ||
		page.Data[0].StartingAt != "2026-03-01T12:00:00Z" || page.Data[0].EndingAt != "2026-03-01T12:01:00Z" ||
		len(page.Data[0].Results) != 2 || len(page.Data[1].Results) != 0 || len(page.Data[2].Results) != 0 {
		t.Fatalf("report %d %+v", status, page)
	}
	r := page.Data[0].Results
	mine, other := r[0], r[1]
	if *mine.APIKeyID != g[0].APIKeyID {
		mine, other = other, mine
	}
	if *mine.APIKeyID != fake.AnthropicKeyID(anthropicKey) || *mine.Model != "claude-fake-4" ||
		mine.UncachedInputTokens != g[0].InputTokens+g[1].InputTokens || mine.CacheCreation.Ephemeral5m != g[0].CacheCreationInputTokens ||
		mine.CacheReadInputTokens != g[1].CacheReadInputTokens || mine.CacheReadInputTokens == 0 || mine.OutputTokens != 48 ||
		*other.APIKeyID != g[2].APIKeyID || other.CacheCreation.Ephemeral5m != g[2].CacheCreationInputTokens {
		t.Fatalf("results %+v", r)
	}

	// The lagged message shows once its lag has passed; ungrouped, a bucket is one total.
	clock.Advance(5 * time.Minute)
	page, _ = usageReport(t, base, anthropicAdmin, window)
	if len(page.Data[1].Results) != 1 || len(page.Data[0].Results) != 1 || page.Data[0].Results[0].Model != nil ||
		page.Data[0].Results[0].APIKeyID != nil || page.Data[0].Results[0].OutputTokens != 72 {
		t.Fatalf("ungrouped %+v", page)
	}
	page, _ = usageReport(t, base, anthropicAdmin, window+"&limit=1")
	if len(page.Data) != 1 || !page.HasMore || page.NextPage == nil {
		t.Fatalf("first page %+v", page)
	}
	page, _ = usageReport(t, base, anthropicAdmin, window+"&limit=2&page="+*page.NextPage)
	if len(page.Data) != 2 || page.Data[0].StartingAt != "2026-03-01T12:01:00Z" || page.HasMore {
		t.Fatalf("second page %+v", page)
	}
	if _, status := usageReport(t, base, anthropicKey, window); status != http.StatusUnauthorized {
		t.Fatalf("an API key read the usage report: %d", status)
	}
}
