package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/settle-dev/settle/ops/fake"
)

// demoLLMFaults is the fault mix of the demo's LLM provider.
const demoLLMFaults = `bill_then_timeout p=0.05 delay=5s
drop_stream chunk=3 p=0.05
rate_limit p=0.04 retry_after=1
server_error p=0.03
slow p=0.1 delay=400ms`

// The demo's LLM answers after demoLLMLatency and streams a chunk every demoLLMChunkDelay,
// as a provider would.
const (
	demoLLMLatency    = 80 * time.Millisecond
	demoLLMChunkDelay = 30 * time.Millisecond
)

// ChatCall is one intent of the demo's chat backend: the gateway route it calls and the
// body it sends. Most are chat completions; every third message goes to the Responses API,
// and every fifth is embedded for search instead. Embeddings are never streamed.
func ChatCall(n int) (route string, body map[string]any, streams bool) {
	prompt := fmt.Sprintf("Summarise order %d for the customer.", 7000+n)
	switch {
	case n%5 == 4:
		return "/v1/embeddings", map[string]any{"model": "text-embedding-3-small", "input": prompt}, false
	case n%3 == 2:
		return "/v1/responses", map[string]any{"model": "gpt-4.1-mini", "input": prompt}, true
	default:
		return "/v1/chat/completions", demoChatBody(n), true
	}
}

// demoChatBody is the chat completion of the demo's message n.
func demoChatBody(n int) map[string]any {
	return map[string]any{"model": "gpt-4o-mini", "messages": []map[string]string{
		{"role": "user", "content": fmt.Sprintf("Summarise order %d for the customer.", 7000+n)}}}
}

// MessagesCall is message n sent to Anthropic's Messages API.
func MessagesCall(n int) (route string, body map[string]any) {
	return "/v1/messages", map[string]any{"model": "claude-haiku-4-5", "max_tokens": 256, "messages": []map[string]string{
		{"role": "user", "content": fmt.Sprintf("Draft a reply about order %d.", 7000+n)}}}
}

// UnknownMessage is a Messages API call whose stream Anthropic breaks after three events:
// the client got part of an answer, Anthropic has no lookup of a message, and the call waits
// as unknown for a person, who settles it from Anthropic's usage report or console.
func (d *Traffic) UnknownMessage(ctx context.Context) {
	if d.fakes.Anthropic == nil {
		return
	}
	d.fakes.Anthropic.AddFault(fake.LLMFault{Kind: fake.LLMFaultDropStream, Chunk: 3, Times: 1})
	route, body := MessagesCall(0)
	d.Send(ctx, route, fmt.Sprintf("msg-broken-%d", time.Now().UnixNano()), "chat-support-7", body, true)
}

// chat plays a chat backend: each user message is one intent with its own
// Idempotency-Key, sent to one of the gateway's APIs (ChatCall; every seventh to
// Anthropic's Messages API where the demo runs a fake Anthropic), sometimes
// double-clicked, sometimes streamed and cut by the browser.
func (d *Traffic) chat(ctx context.Context) {
	rnd := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 11))
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		key := fmt.Sprintf("msg-%d-%d", time.Now().Unix(), n)
		route, body, streams := ChatCall(n)
		if n%7 == 6 && d.fakes.Anthropic != nil {
			route, body = MessagesCall(n)
		}
		chatRef := fmt.Sprintf("chat-%d", 900+n%7)
		switch roll := rnd.IntN(100); {
		case roll < 20: // a double click
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() { defer wg.Done(); d.complete(ctx, route, key, chatRef, body, false, -1, 1) }()
			}
			wg.Wait()
		case roll < 35 && streams: // the stream breaks after two chunks; the app retries with the key
			d.complete(ctx, route, key, chatRef, body, true, 2, 0)
			d.complete(ctx, route, key, chatRef, body, true, -1, 5)
		case roll < 60 && streams:
			d.Send(ctx, route, key, chatRef, body, true)
		default:
			d.Send(ctx, route, key, chatRef, body, false)
		}
	}
}

// Send sends one message of the chat backend to a gateway route with its Idempotency-Key
// and the chat it belongs to, and reads the whole answer: a plain call, neither
// double-clicked nor cut off.
func (d *Traffic) Send(ctx context.Context, route, key, chatRef string, body map[string]any, stream bool) {
	d.complete(ctx, route, key, chatRef, body, stream, -1, 0)
}

// complete sends one request to a gateway route; cutAfter ≥ 0 reads that many stream lines
// and hangs up; wait asks the gateway to wait for a request in flight with the same key.
func (d *Traffic) complete(ctx context.Context, route, key, chatRef string, body map[string]any, stream bool, cutAfter, wait int) {
	b := map[string]any{}
	if stream {
		b["stream"] = true
	}
	for k, v := range body {
		b[k] = v
	}
	raw, _ := json.Marshal(b)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.srv.URL+route, bytes.NewReader(raw))
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Settle-Chat-Ref", chatRef)
	if wait > 0 {
		req.Header.Set("Prefer", fmt.Sprintf("wait=%d", wait))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if cutAfter < 0 {
		_, _ = io.Copy(io.Discard, resp.Body)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	for i := 0; i < cutAfter && sc.Scan(); i++ {
	}
}
