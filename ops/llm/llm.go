// Package llm is Settle's LLM gateway: one generation per user intent.
//
// A client sends POST /v1/chat/completions (or /v1/responses, /v1/embeddings, or Anthropic's
// /v1/messages) with an
// Idempotency-Key per intent (one message sent, one summary asked for, one document
// embedded). The gateway records the request in the ledger before anything reaches the
// provider, sends it, stores the answer, and answers every later request with the same key
// from what it stored: no second generation, no second bill. Every route keeps the same protocol; what differs
// between them (their requests, answers and streams) is an api of its own (api.go).
//
// The operation of a call (kind llm_call, intent key = the Idempotency-Key, scoped by
// tenant) goes through the statuses of the LLM idempotency scenario as ledger statuses and
// phases:
//
//	received          the operation row, committed with its first attempt (status in_progress, phase sending)
//	sent_to_provider  the request was written to the provider (phase)
//	first_token       the first token of a stream arrived (phase)
//	completed         status succeeded, the completion stored on the operation
//	failed            status failed: the provider refused, nothing was billed
//	expired           status expired: the key's TTL passed without an answer; never sent again
//
// and unknown when an attempt's outcome is uncertain and the policy forbids a resend.
//
// LLM providers take no idempotency key, so an attempt that timed out may have been billed;
// a resend may bill twice. Policy per tenant and route decides: interactive resends within
// the budget and counts each extra send as a possible duplicate; batch sends nothing more
// and leaves the operation unknown for reconciliation or a person.
//
// A stream that breaks on the client's side resumes: every event relayed carries an SSE id,
// and a retry with the key (and Last-Event-ID) gets the rest of the same generation, live
// while it runs in this process, from the events stored with the answer once it ended, and
// never a second generation (stream.go says how).
//
// A call the provider answered with a whole success is answered before its close is
// written: the client has the JSON answer, or its stream's final event, at once, and the
// close follows without holding the client's connection (early.go says what this keeps).
//
// The gateway holds no HTTP of its own: it calls the provider through Upstream, which
// ops/openai implements for OpenAI's APIs and ops/anthropic for Anthropic's, and the web
// package turns client HTTP into a Request and a Sink.
package llm

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Mode is how a tenant's calls treat an attempt whose outcome is uncertain.
type Mode string

// The modes.
const (
	// Interactive resends within the retry budget; each resend after an uncertain attempt
	// is counted as a possible duplicate.
	Interactive Mode = "interactive"
	// Batch never resends after an uncertain attempt: the operation becomes unknown.
	Batch Mode = "batch"
)

// Valid reports whether m is a known mode.
func (m Mode) Valid() bool { return m == Interactive || m == Batch }

// Upstream is an LLM provider. ops/openai's Client implements it over HTTP for OpenAI's
// APIs, ops/anthropic's for Anthropic's Messages API.
type Upstream interface {
	// Name is the provider's name as stored on operations.
	Name() string
	// Send performs one attempt and classifies how it ended. It never touches the store.
	Send(ctx context.Context, c Call) Reply
}

// Call is one attempt at the provider.
type Call struct {
	// Method is the HTTP method, "" for POST; a GET reads what the provider holds (a
	// background response, read again by its id).
	Method string
	// Path is the API's path under the provider's base URL; "" is /chat/completions.
	Path string
	// Header holds the client's headers the API passes to the provider (Anthropic's
	// anthropic-version and anthropic-beta), by lower-case name; nil for most APIs.
	Header      map[string]string
	Body        []byte
	Stream      bool
	OperationID string
	// TenantID is the operation's tenant; with OperationID it tags a stored completion.
	TenantID int64
	Attempt  int
	// Sent is called once the request has been written to the provider.
	Sent func()
	// Answered is called with the provider's request id when a 200 answer's headers
	// arrive, before any event.
	Answered func(requestID string)
	// Event is called with each stream event's data, in order, as it arrives; the data is
	// the callee's to keep. more says the provider's next event has arrived too and is
	// passed on at once, without a wait for the provider: the gateway may hold this one
	// back to send both together. An event passed with more false goes to the client
	// before the provider is read again. An error stops the attempt: the event was not one
	// of the API's.
	Event func(data []byte, more bool) error
	// Whole, when set, says whether the events delivered so far make a whole answer. A
	// stream ends well with [DONE], or, for an API that sends none, when it ends whole.
	Whole func() bool
}

// ChatPath is the provider's path of chat completions, a Call's default.
const ChatPath = "/chat/completions"

// ErrStreamFailed is what Call.Event returns for an event in which the provider says the
// generation failed (the Responses API's error and response.failed): like an error event of
// a chat completion stream, it ends the attempt uncertain, since the provider may have
// billed what it generated.
var ErrStreamFailed = errors.New("the provider reported a failure in the stream")

// Reply is how one attempt ended.
type Reply struct {
	Outcome    ops.Outcome
	HTTPStatus int
	// RequestID is the provider's request id (x-request-id).
	RequestID string
	// ErrorCode says what went wrong: upstream_timeout, stream_broken, upstream_500,
	// upstream_bad_response, upstream_rate_limited, upstream_refused...
	ErrorCode string
	// Message is the provider's own explanation of a refusal, safe to show the client.
	Message    string
	RetryAfter time.Duration
	// Body is a non-streaming answer as received.
	Body []byte
	// Events counts the stream events delivered.
	Events int
}

// uncertain reports whether the attempt may have been billed without our knowing.
func (r Reply) uncertain() bool {
	return r.Outcome == ops.OutcomeTimeout || r.Outcome == ops.OutcomeKeyInUse
}

// Request is one client call of a route of the gateway.
type Request struct {
	Tenant *ops.Tenant
	// Route is the route called, which says the API and names the route for the policy:
	// /v1/chat/completions (the default), /v1/embeddings, /v1/responses or /v1/messages.
	Route string
	// Key is the Idempotency-Key header; HasKey says whether it was sent at all.
	Key    string
	HasKey bool
	// ContentType is the request's Content-Type header.
	ContentType string
	// Body is read up to Config.MaxBody bytes.
	Body io.Reader
	// Prefer is the Prefer header (wait=N).
	Prefer string
	// RequestRef is the client's own id for this request (X-Request-Ref, or
	// X-Client-Request-Id as OpenAI clients send it), recorded with it.
	RequestRef string
	// RequestRefFrom names the header RequestRef came from, for a refusal to name it.
	RequestRefFrom string
	// ChatRef is the client's conversation id (Settle-Chat-Ref), for support searches.
	ChatRef string
	// Header returns a request header by name, for an API that reads its own headers
	// (the Messages API's anthropic-version and anthropic-beta); nil reads none.
	Header func(name string) string
	// Busy, when set, says the tenant has no place left on this server for a new paid call:
	// its places are held by the background responses the gateway follows for it. The
	// request is then served only where it starts no generation (a replay, a key in flight,
	// a retry that goes on with a response already created); where it would open an
	// operation or send one again, it is refused with what Busy returns, told opID, the
	// operation a resend would have gone on with ("" for a new call), and recorded as the
	// tenant's refused request (ops rule 8).
	Busy func(opID string) error
	// Following, when set, is called once the client of a background response has all it
	// gets of the request and the request goes on only to follow the response at the
	// provider until it ends; the transport may lend the request's place to the tenant's
	// reads, cancels and retries meanwhile.
	Following func()
	// OutputCap, when set, is told the output cap Settle set on the call it sends for a
	// tenant with an LLM budget whose request named none, before the answer begins, so the
	// transport can say so (Settle-Output-Cap).
	OutputCap func(n int64)
}

// Head is what a response starts with.
type Head struct {
	Stream bool
	// Replayed marks an answer served from a stored or in-flight generation.
	Replayed          bool
	OperationID       string
	ProviderRequestID string
	// PreferenceApplied echoes the wait preference when it was honoured.
	PreferenceApplied string
	// ResumedAfter is the id of the event a resumed stream goes on after (the client's
	// Last-Event-ID); "" for a stream sent from its first event.
	ResumedAfter string
	// Length is the size of a JSON answer, written whole by one Write; 0 for a stream.
	Length int
	// Close says the request goes on after this answer, which is sent at once and whole:
	// the connection closes after it rather than wait to carry another request.
	Close bool
}

// Sink is where the gateway writes its answer. Begin is called at most once, before any
// Write; after Begin, a failure is reported inside the body (an SSE error event). A Sink
// does not keep p after a Write returns.
type Sink interface {
	Begin(h Head) error
	// Write sends part of the body; a stream's part goes to the client at once.
	Write(p []byte) error
}

// HoldingSink is a Sink that can hold a stream's part back (web's does): Hold writes p
// without sending it yet, and the next Write, or Flush, sends it with what follows. The
// gateway holds an event only while the provider's next one is already in hand, so a burst
// of events costs the client's connection one send while every event still goes out as
// soon as it came; nothing is held while the gateway waits for the provider.
type HoldingSink interface {
	Sink
	Hold(p []byte) error
	Flush() error
}

// EndingSink is a Sink that can send a stream's last part with the end of the response
// (web's does): End writes p, after whatever was held, without sending it, and the end of
// the response, as the request returns, sends them and what closes the body in one send.
// The gateway writes nothing after End, and returns (or releases the request answered
// before its close) at once.
type EndingSink interface {
	Sink
	End(p []byte) error
}

// Problem carries what a transport needs to answer an error beyond its code: how long to
// wait before trying again, and the provider's own status for a refusal it relays.
type Problem struct {
	RetryAfter     time.Duration
	UpstreamStatus int
}

func (p *Problem) Error() string { return "llm gateway problem" }

// ProblemOf returns the Problem carried by err, if any.
func ProblemOf(err error) (Problem, bool) {
	var p *Problem
	if errors.As(err, &p) {
		return *p, true
	}
	return Problem{}, false
}

// The reasons the gateway's errors carry, for the transport to map to statuses.
const (
	ReasonMissingKey       = "missing_idempotency_key"
	ReasonInvalidKey       = "invalid_idempotency_key"
	ReasonMalformedJSON    = "malformed_json"
	ReasonInvalidRequest   = "invalid_request"
	ReasonBodyTooLarge     = "body_too_large"
	ReasonUnsupportedType  = "unsupported_media_type"
	ReasonKeyInUse         = "idempotency_key_in_use"
	ReasonKeyReused        = "idempotency_key_reused"
	ReasonOutcomeUnknown   = "outcome_unknown"
	ReasonGenerationFailed = "generation_failed"
	ReasonRateLimited      = "upstream_rate_limited"
	ReasonTimeout          = "upstream_timeout"
	ReasonUpstreamError    = "upstream_error"
	ReasonBadResponse      = "upstream_bad_response"
	ReasonUnreachable      = "upstream_unreachable"
	ReasonUpstreamAuth     = "upstream_auth"
	ReasonRefused          = "upstream_refused"
	// ReasonAnswerNotStored: the key's generation succeeded (a person closed it with the
	// provider's completion id), but Settle does not hold its text to replay.
	ReasonAnswerNotStored = "answer_not_stored"
)
