package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// LLMFaultKind names one way the fake LLM misbehaves.
type LLMFaultKind string

// The fault kinds of the fake LLM. They differ in whether the request is billed, which is
// what decides whether a resend may bill twice.
const (
	// LLMFaultBillThenTimeout generates and bills the completion, then holds the answer
	// for Delay (default 90 s, longer than any client's timeout). The client sees a
	// timeout; the provider's usage report shows the request. A background response is
	// answered at once, queued, and its generation held instead.
	LLMFaultBillThenTimeout LLMFaultKind = "bill_then_timeout"
	// LLMFaultDropStream bills, streams Chunk chunks and closes the connection without
	// [DONE]. A non-streaming request is billed and its connection closed unanswered.
	LLMFaultDropStream LLMFaultKind = "drop_stream"
	// LLMFaultRateLimit answers 429 with Retry-After. Nothing is billed.
	LLMFaultRateLimit LLMFaultKind = "rate_limit"
	// LLMFaultServerError answers 500 server_error. Nothing is billed. With Chunk set, a
	// stream of the Responses or Messages API (and a background response) is billed instead
	// and fails after Chunk events: an error event, then response.failed at the Responses
	// API, whose stored response says failed.
	LLMFaultServerError LLMFaultKind = "server_error"
	// LLMFaultGarbage answers 200 with a body that is not a completion (an HTML page from
	// a broken proxy). Nothing is billed.
	LLMFaultGarbage LLMFaultKind = "garbage"
	// LLMFaultSlow waits Delay before generating; the request is billed as usual.
	LLMFaultSlow LLMFaultKind = "slow"
	// LLMFaultOverloaded answers that the provider is overloaded: 529 overloaded_error at
	// the fake Anthropic, 503 at the fake OpenAI. Nothing is billed, unless Chunk is set on
	// a stream: then the stream breaks off with an overloaded error after Chunk events,
	// billed.
	LLMFaultOverloaded LLMFaultKind = "overloaded"
	// LLMFaultStoreLag answers as usual, but a completion created with store: true becomes
	// visible to list and retrieve only Delay after it was billed (any rule's Lag does the
	// same beside its own fault).
	LLMFaultStoreLag LLMFaultKind = "store_lag"
)

// llmRules is the syntax of the fake LLM's rules, which the fake Anthropic's share: no
// method, and the chunk and lag options.
var llmRules = ruleSyntax[LLMFaultKind]{
	kinds: []LLMFaultKind{LLMFaultBillThenTimeout, LLMFaultDropStream, LLMFaultRateLimit,
		LLMFaultServerError, LLMFaultGarbage, LLMFaultSlow, LLMFaultStoreLag, LLMFaultOverloaded},
	chunk: true,
	lag:   true,
}

// LLMFault is one fault rule of the fake LLM. It matches requests to Path (default every
// completion) and fires on the listed call numbers, or with Probability drawn from the
// seeded source, at most Times times.
type LLMFault struct {
	// Path is a request path such as "/v1/chat/completions"; empty or "*" matches any.
	Path string `json:"path,omitempty"`
	// Calls lists the 1-based numbers of matching requests the rule hits. Empty means
	// every matching request, subject to Probability.
	Calls []int `json:"calls,omitempty"`
	// Probability (0..1) is the chance the rule fires when Calls is empty; 0 means always.
	Probability float64      `json:"probability,omitempty"`
	Kind        LLMFaultKind `json:"kind"`
	// Delay is how long bill_then_timeout holds the answer and slow waits.
	Delay time.Duration `json:"-"`
	// Chunk is how many chunks (server-sent events) drop_stream sends before it drops the
	// connection; on the Responses and Messages APIs also how many events a stream sends
	// before server_error or overloaded breaks it off.
	Chunk int `json:"chunk,omitempty"`
	// RetryAfter is the Retry-After value, in seconds, of a rate_limit answer.
	RetryAfter int `json:"retry_after,omitempty"`
	// Times caps how often the rule fires in total; 0 means no cap.
	Times int `json:"times,omitempty"`
	// Lag delays the stored copy of a completion the hit request created with store: true:
	// it is billed (and may time out) now, and listed or retrieved only Lag later.
	Lag time.Duration `json:"-"`
}

type llmFaultJSON struct {
	Path        string       `json:"path,omitempty"`
	Calls       []int        `json:"calls,omitempty"`
	Probability float64      `json:"probability,omitempty"`
	Kind        LLMFaultKind `json:"kind"`
	Delay       string       `json:"delay,omitempty"`
	Chunk       int          `json:"chunk,omitempty"`
	RetryAfter  int          `json:"retry_after,omitempty"`
	Times       int          `json:"times,omitempty"`
	Lag         string       `json:"lag,omitempty"`
}

// MarshalJSON writes Delay as a duration string.
func (f LLMFault) MarshalJSON() ([]byte, error) {
	j := llmFaultJSON{Path: f.Path, Calls: f.Calls, Probability: f.Probability, Kind: f.Kind, Chunk: f.Chunk,
		RetryAfter: f.RetryAfter, Times: f.Times}
	if f.Delay != 0 {
		j.Delay = f.Delay.String()
	}
	if f.Lag != 0 {
		j.Lag = f.Lag.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads Delay as a duration string ("3s").
func (f *LLMFault) UnmarshalJSON(b []byte) error {
	var j llmFaultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*f = LLMFault{Path: j.Path, Calls: j.Calls, Probability: j.Probability, Kind: j.Kind, Chunk: j.Chunk,
		RetryAfter: j.RetryAfter, Times: j.Times}
	if j.Delay != "" {
		d, err := time.ParseDuration(j.Delay)
		if err != nil {
			return fmt.Errorf("fault delay: %w", err)
		}
		f.Delay = d
	}
	if j.Lag != "" {
		d, err := time.ParseDuration(j.Lag)
		if err != nil {
			return fmt.Errorf("fault lag: %w", err)
		}
		f.Lag = d
	}
	return nil
}

// Validate reports whether the rule can be used.
func (f LLMFault) Validate() error {
	return llmRules.check(rule[LLMFaultKind]{path: f.Path, kind: f.Kind, when: f.timing(), delay: f.Delay,
		lag: f.Lag, chunk: f.Chunk, retryAfter: f.RetryAfter})
}

// timing is the part of the rule that says which matching requests it hits.
func (f LLMFault) timing() when {
	return when{calls: f.Calls, probability: f.Probability, times: f.Times}
}

func (f LLMFault) matches(path string) bool {
	return f.Path == "" || f.Path == "*" || f.Path == path
}

// AddFault appends a fault rule. Rules are checked in the order they were added; when
// several fire for one request, the first wins, and every matching rule counts the call.
func (l *LLM) AddFault(f LLMFault) { l.faults.add(f) }

// ClearFaults removes every fault rule.
func (l *LLM) ClearFaults() { l.faults.clear() }

// Faults returns the current rules.
func (l *LLM) Faults() []LLMFault { return l.faults.list() }

func (l *LLM) pickFault(path string) *LLMFault {
	return l.faults.pick(func(f LLMFault) bool { return f.matches(path) }, LLMFault.timing)
}

// ParseLLMFaults parses a compact fault specification, as given to `settle fake llm
// --faults`. Rules are separated by ";" or newlines.
//
//	rule    = [ path ] kind { option }
//	kind    = bill_then_timeout | drop_stream | rate_limit | server_error | garbage | slow
//	        | store_lag | overloaded
//	option  = "p=" float | "calls=" list | "delay=" duration | "chunk=" int
//	        | "retry_after=" int | "times=" int | "lag=" duration
//
// Example:
//
//	bill_then_timeout p=0.05 delay=30s lag=5s; drop_stream p=0.05 chunk=5; rate_limit calls=3 retry_after=1
func ParseLLMFaults(spec string) ([]LLMFault, error) {
	return parseRules(spec, llmRules, func(r rule[LLMFaultKind]) LLMFault {
		return LLMFault{Path: r.path, Kind: r.kind, Calls: r.calls, Probability: r.probability, Delay: r.delay,
			Chunk: r.chunk, RetryAfter: r.retryAfter, Times: r.times, Lag: r.lag}
	})
}

func (l *LLM) adminListFaults(w http.ResponseWriter, _ *http.Request) {
	writeFaults(w, l.Faults())
}

// adminAddFaults appends rules given as a JSON array of LLMFault, or, with Content-Type
// text/plain, as a ParseLLMFaults spec.
func (l *LLM) adminAddFaults(w http.ResponseWriter, r *http.Request) {
	addFaults(w, r, ParseLLMFaults, l.AddFault, l.Faults)
}
