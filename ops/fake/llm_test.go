package fake_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/fake"
)

const llmKey = "sk-fake-test"

// billedSoon returns gens once it holds n generations, or after 10 s what it holds then: the
// fake bills a call when its handler runs, which on a busy machine can be after the client's
// timeout ended the call.
func billedSoon[G any](gens func() []G, n int) []G {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if g := gens(); len(g) >= n || time.Now().After(deadline) {
			return g
		}
	}
}

func startLLM(t *testing.T, opts fake.LLMOptions) (*fake.LLM, string) {
	t.Helper()
	l := fake.NewLLM(opts)
	base, err := l.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l, base
}

func chat(t *testing.T, c *http.Client, base, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+llmKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const question = `{"model":"fake-small","messages":[{"role":"user","content":"where is my order 4417"}],"temperature":0.2}`

type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// events reads an SSE body into its data payloads; done says whether [DONE] arrived.
func events(t *testing.T, r io.Reader) (data []string, done bool, err error) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		d := strings.TrimPrefix(line, "data: ")
		if d == "[DONE]" {
			return data, true, sc.Err()
		}
		data = append(data, d)
	}
	return data, false, sc.Err()
}

func streamedText(t *testing.T, data []string) (string, int) {
	t.Helper()
	var b strings.Builder
	usageTokens := -1
	for _, d := range data {
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		if ch.Object != "chat.completion.chunk" {
			t.Fatalf("chunk object %q", ch.Object)
		}
		for _, c := range ch.Choices {
			b.WriteString(c.Delta.Content)
		}
		if ch.Usage != nil {
			usageTokens = ch.Usage.CompletionTokens
		}
	}
	return b.String(), usageTokens
}

func TestLLMCompletionIsDeterministicAndBilled(t *testing.T) {
	t.Parallel()
	l, base := startLLM(t, fake.LLMOptions{})
	var first, second completion
	for _, c := range []*completion{&first, &second} {
		resp := chat(t, http.DefaultClient, base, question)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if !strings.HasPrefix(resp.Header.Get("x-request-id"), "req_") {
			t.Fatalf("x-request-id %q", resp.Header.Get("x-request-id"))
		}
		if err := json.NewDecoder(resp.Body).Decode(c); err != nil {
			t.Fatal(err)
		}
	}
	if first.Object != "chat.completion" || !strings.HasPrefix(first.ID, "chatcmpl-") || first.Choices[0].FinishReason != "stop" {
		t.Fatalf("completion %+v", first)
	}
	if first.Choices[0].Message.Content == "" || first.Choices[0].Message.Content != second.Choices[0].Message.Content {
		t.Fatalf("the same request got %q and %q; want the same non-empty text", first.Choices[0].Message.Content, second.Choices[0].Message.Content)
	}
	if first.ID == second.ID {
		t.Fatal("two generations share an id")
	}
	if first.Usage.CompletionTokens != 24 || first.Usage.PromptTokens == 0 {
		t.Fatalf("usage %+v", first.Usage)
	}
	if second.Usage.PromptTokensDetails.CachedTokens != first.Usage.PromptTokens&^15 {
		t.Fatalf("the repeated prompt cached %d tokens, want %d", second.Usage.PromptTokensDetails.CachedTokens, first.Usage.PromptTokens&^15)
	}
	gens := l.Generations()
	if len(gens) != 2 || gens[0].ID != first.ID || gens[0].APIKeyID != fake.LLMKeyID(llmKey) || gens[0].Content != first.Choices[0].Message.Content {
		t.Fatalf("ledger %+v", gens)
	}
	// Another question is another answer.
	resp := chat(t, http.DefaultClient, base, strings.Replace(question, "0.2", "0.3", 1))
	var other completion
	_ = json.NewDecoder(resp.Body).Decode(&other)
	if other.Choices[0].Message.Content == first.Choices[0].Message.Content {
		t.Fatal("another temperature gave the same text")
	}
}

func TestLLMStreamMatchesNonStream(t *testing.T) {
	t.Parallel()
	_, base := startLLM(t, fake.LLMOptions{ChunkDelay: time.Millisecond})
	var whole completion
	_ = json.NewDecoder(chat(t, http.DefaultClient, base, question).Body).Decode(&whole)
	body := strings.Replace(question, `"temperature"`, `"stream":true,"stream_options":{"include_usage":true},"temperature"`, 1)
	resp := chat(t, http.DefaultClient, base, body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	data, done, err := events(t, resp.Body)
	if err != nil || !done {
		t.Fatalf("stream ended early: done=%v err=%v", done, err)
	}
	text, usage := streamedText(t, data)
	if text != whole.Choices[0].Message.Content {
		t.Fatalf("streamed %q, non-streamed %q", text, whole.Choices[0].Message.Content)
	}
	if usage != 24 {
		t.Fatalf("usage chunk says %d completion tokens, want 24", usage)
	}
	// role + 24 tokens + finish + usage
	if len(data) != 27 {
		t.Fatalf("%d chunks, want 27", len(data))
	}
}

func TestLLMFaults(t *testing.T) {
	t.Parallel()
	streamBody := strings.Replace(question, `"temperature"`, `"stream":true,"temperature"`, 1)

	t.Run("rate limit is not billed", func(t *testing.T) {
		t.Parallel()
		l, base := startLLM(t, fake.LLMOptions{})
		l.AddFault(fake.LLMFault{Kind: fake.LLMFaultRateLimit, Calls: []int{1}, RetryAfter: 2})
		resp := chat(t, http.DefaultClient, base, question)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
			t.Fatalf("got %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if n := len(l.Generations()); n != 0 {
			t.Fatalf("%d generations billed", n)
		}
		if resp := chat(t, http.DefaultClient, base, question); resp.StatusCode != http.StatusOK {
			t.Fatalf("second call %d", resp.StatusCode)
		}
	})
	t.Run("server error is not billed", func(t *testing.T) {
		t.Parallel()
		l, base := startLLM(t, fake.LLMOptions{})
		l.AddFault(fake.LLMFault{Kind: fake.LLMFaultServerError, Times: 1})
		resp := chat(t, http.DefaultClient, base, question)
		var e struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != http.StatusInternalServerError || e.Error.Type != "server_error" || len(l.Generations()) != 0 {
			t.Fatalf("got %d %+v, %d generations", resp.StatusCode, e, len(l.Generations()))
		}
	})
	t.Run("drop stream at chunk K is billed", func(t *testing.T) {
		t.Parallel()
		l, base := startLLM(t, fake.LLMOptions{})
		l.AddFault(fake.LLMFault{Kind: fake.LLMFaultDropStream, Chunk: 5})
		resp := chat(t, http.DefaultClient, base, streamBody)
		data, done, err := events(t, resp.Body)
		if done || err == nil || len(data) != 5 {
			t.Fatalf("got %d chunks, done=%v, err=%v; want 5 chunks then a broken connection", len(data), done, err)
		}
		if gens := l.Generations(); len(gens) != 1 || gens[0].Fault != "drop_stream" {
			t.Fatalf("ledger %+v", gens)
		}
	})
	t.Run("bill then timeout", func(t *testing.T) {
		t.Parallel()
		l, base := startLLM(t, fake.LLMOptions{})
		l.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Calls: []int{1}, Delay: 5 * time.Second})
		c := &http.Client{Timeout: 200 * time.Millisecond}
		req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(question))
		req.Header.Set("Authorization", "Bearer "+llmKey)
		_, err := c.Do(req)
		var ne interface{ Timeout() bool }
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("got %v, want a client timeout", err)
		}
		if gens := l.Generations(); len(gens) != 1 || gens[0].Fault != "bill_then_timeout" {
			t.Fatalf("ledger %+v", gens)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		t.Parallel()
		l, base := startLLM(t, fake.LLMOptions{})
		l.AddFault(fake.LLMFault{Kind: fake.LLMFaultGarbage})
		resp := chat(t, http.DefaultClient, base, question)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || json.Valid(b) {
			t.Fatalf("got %d %q, want 200 with a body that is not JSON", resp.StatusCode, b)
		}
	})
	t.Run("seeded probability is reproducible", func(t *testing.T) {
		t.Parallel()
		pattern := func() string {
			l, base := startLLM(t, fake.LLMOptions{Seed: 7})
			l.AddFault(fake.LLMFault{Kind: fake.LLMFaultServerError, Probability: 0.5})
			var b strings.Builder
			for range 20 {
				fmt.Fprintf(&b, "%d ", chat(t, http.DefaultClient, base, question).StatusCode)
			}
			return b.String()
		}
		a, b := pattern(), pattern()
		if a != b || !strings.Contains(a, "500") || !strings.Contains(a, "200") {
			t.Fatalf("patterns %q and %q; want the same mix of 200 and 500", a, b)
		}
	})
}

func TestLLMUsageReport(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	l, base := startLLM(t, fake.LLMOptions{Clock: clock.Now})
	chat(t, http.DefaultClient, base, question)
	chat(t, http.DefaultClient, base, strings.Replace(question, "fake-small", "fake-large", 1))
	clock.Advance(time.Minute)
	chat(t, http.DefaultClient, base, question)
	start := clock.Now().Add(-time.Minute).Truncate(time.Minute)
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/usage?bucket=1m&start=%d&end=%d", base, start.Unix(), start.Add(3*time.Minute).Unix()), nil)
	req.Header.Set("Authorization", "Bearer "+llmKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Object string `json:"object"`
		Data   []struct {
			StartTime int64 `json:"start_time"`
			EndTime   int64 `json:"end_time"`
			Results   []struct {
				Object           string `json:"object"`
				InputTokens      int    `json:"input_tokens"`
				OutputTokens     int    `json:"output_tokens"`
				NumModelRequests int    `json:"num_model_requests"`
				APIKeyID         string `json:"api_key_id"`
				Model            string `json:"model"`
			} `json:"results"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	if page.Object != "page" || len(page.Data) != 3 {
		t.Fatalf("page %+v; want 3 one-minute buckets", page)
	}
	b0, b1 := page.Data[0], page.Data[1]
	if b0.EndTime-b0.StartTime != 60 || len(b0.Results) != 2 || len(b1.Results) != 1 || len(page.Data[2].Results) != 0 {
		t.Fatalf("buckets %+v", page.Data)
	}
	r := b0.Results[1]
	if r.Model != "fake-small" || r.NumModelRequests != 1 || r.OutputTokens != 24 || r.InputTokens == 0 ||
		r.APIKeyID != fake.LLMKeyID(llmKey) || !strings.HasSuffix(r.Object, "usage.completions.result") {
		t.Fatalf("result %+v", r)
	}
	gens := l.Generations()
	if len(gens) != 3 {
		t.Fatalf("%d generations", len(gens))
	}

	// The admin ledger lists the same generations.
	resp2, err := http.Get(strings.TrimSuffix(base, "/v1") + "/_fake/llm/generations")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	var listed []fake.Generation
	if err := json.NewDecoder(resp2.Body).Decode(&listed); err != nil || len(listed) != 3 || listed[2].ID != gens[2].ID {
		t.Fatalf("admin ledger %+v, %v", listed, err)
	}
}

func TestLLMRefusesBadRequestsWithoutBilling(t *testing.T) {
	t.Parallel()
	l, base := startLLM(t, fake.LLMOptions{})
	req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(question))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %d", resp.StatusCode)
	}
	for _, body := range []string{`{`, `{"model":"fake-small","messages":[]}`, `{"messages":[{"role":"user","content":"x"}]}`} {
		if resp := chat(t, http.DefaultClient, base, body); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: %d", body, resp.StatusCode)
		}
	}
	if n := len(l.Generations()); n != 0 {
		t.Fatalf("%d generations billed", n)
	}
}

func TestLLMAdminFaultsAndLoopback(t *testing.T) {
	t.Parallel()
	l, base := startLLM(t, fake.LLMOptions{})
	root := strings.TrimSuffix(base, "/v1")
	resp, err := http.Post(root+"/_fake/llm/faults", "text/plain", bytes.NewBufferString("rate_limit calls=1 retry_after=3; drop_stream p=0.5 chunk=4"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if f := l.Faults(); resp.StatusCode != http.StatusOK || len(f) != 2 || f[0].RetryAfter != 3 || f[1].Chunk != 4 || f[1].Probability != 0.5 {
		t.Fatalf("faults %+v (%d)", f, resp.StatusCode)
	}
	if _, err := fake.ParseLLMFaults("explode"); err == nil {
		t.Fatal("an unknown fault kind parsed")
	}
	if _, err := fake.NewLLM(fake.LLMOptions{}).Start("0.0.0.0:0"); err == nil {
		t.Fatal("the fake listened on every interface")
	}
}

func TestParseLLMFaults(t *testing.T) {
	t.Parallel()
	got, err := fake.ParseLLMFaults("/v1/chat/completions bill_then_timeout p=0.05 delay=30s LAG=5s; drop_stream chunk=5 times=2\n" +
		";* rate_limit calls=3,5-6 Retry-After=1;;store_lag delay=2s")
	if err != nil {
		t.Fatal(err)
	}
	want := []fake.LLMFault{
		{Path: "/v1/chat/completions", Kind: fake.LLMFaultBillThenTimeout, Probability: 0.05, Delay: 30 * time.Second, Lag: 5 * time.Second},
		{Kind: fake.LLMFaultDropStream, Chunk: 5, Times: 2},
		{Path: "*", Kind: fake.LLMFaultRateLimit, Calls: []int{3, 5, 6}, RetryAfter: 1},
		{Kind: fake.LLMFaultStoreLag, Delay: 2 * time.Second},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{
		"explode",                 // unknown kind
		"/v1/responses",           // no kind
		"POST /v1/responses slow", // the fake LLM's rules name no method
		"/v1/a /v1/b slow",        // two paths
		"v1/responses slow",       // path without /
		"slow delay=fast",         // bad duration
		"slow lag=soon",           // bad lag
		"slow lag=-1s",            // negative lag
		"drop_stream chunk=-1",    // negative chunk
		"slow p=2",                // probability out of range
		"slow calls=0",            // calls are 1-based
		"slow colour=red",         // unknown option
		"slow delay",              // option without a value
		"rate_limit slow",         // two kinds
		"Store_Lag delay=2s",      // kinds are lower case
	} {
		if _, err := fake.ParseLLMFaults(bad); err == nil {
			t.Errorf("ParseLLMFaults(%q) succeeded", bad)
		}
	}
	// Rules round-trip through the admin JSON form, delay and lag as duration strings.
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"delay":"30s"`) || !strings.Contains(string(b), `"lag":"5s"`) {
		t.Fatalf("JSON form %s", b)
	}
	var back []fake.LLMFault
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("JSON round trip: %s -> %+v, %v", b, back, err)
	}
}
