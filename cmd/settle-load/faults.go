package main

import (
	"time"

	"github.com/settle-dev/settle/ops/fake"
)

// The fakes' latency: a completion's first byte after llmLatency, then a chunk every
// llmChunkDelay (24 words by default), so a streamed answer takes about 170 ms at the fake.
const (
	llmLatency    = 50 * time.Millisecond
	llmChunkDelay = 5 * time.Millisecond
)

// stripeFaults is the fake Stripe's fault mix on refunds: a tenth of them slow (holding
// their key, so a double click meets key_in_use), and a few percent timing out or dropping
// after the refund was made, rate limited, failing before it or unavailable. The timeouts
// outlast SETTLE_STRIPE_TIMEOUT, so Settle must resend with the same key.
var stripeFaults = []fake.Fault{
	{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultTimeoutAfterCommit, Probability: 0.01, Delay: 4 * time.Second},
	{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultDropAfterCommit, Probability: 0.01},
	{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultRateLimit, Probability: 0.02, RetryAfter: 1},
	{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultServerError, Probability: 0.005},
	{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultUnavailable, Probability: 0.01},
	{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultSlow, Probability: 0.1, Delay: 200 * time.Millisecond},
}

// llmFaults is the fake LLM's fault mix: a few percent billed then timing out (beyond
// SETTLE_LLM_ATTEMPT_TIMEOUT), streams dropped after three chunks, rate limits, server
// errors, and slow generations.
var llmFaults = []fake.LLMFault{
	{Kind: fake.LLMFaultBillThenTimeout, Probability: 0.01, Delay: 5 * time.Second},
	{Kind: fake.LLMFaultDropStream, Probability: 0.01, Chunk: 3},
	{Kind: fake.LLMFaultRateLimit, Probability: 0.02, RetryAfter: 1},
	{Kind: fake.LLMFaultServerError, Probability: 0.01},
	{Kind: fake.LLMFaultSlow, Probability: 0.05, Delay: 400 * time.Millisecond},
}

// The traffic mix: what share of intents each kind is, and how often an intent is sent
// twice at once (a double click, to both replicas), sent again after its answer (a client
// that did not hear it), or followed by its key with another body (refused 422).
var intentMix = []struct {
	kind  string
	share float64
}{
	{"refund", 0.35}, {"chat", 0.2}, {"chat-stream", 0.2}, {"job", 0.2}, {"refund-over", 0.05},
}

const (
	doubleClickP = 0.15
	retryLaterP  = 0.10
	keyReuseP    = 0.05
	// requestsPerIntent is about how many requests an intent sends with the shares above
	// (one, plus the double clicks, the retries, the reused keys of chats and jobs and the
	// resends of unconfirmed refunds): the intent rate is the request rate divided by it.
	requestsPerIntent = 1.28
)
