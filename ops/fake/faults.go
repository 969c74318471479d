package fake

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FaultKind names one way the fake Stripe misbehaves.
type FaultKind string

// The fault kinds. They differ in whether anything is committed and whether the answer is
// kept under the idempotency key, because those two facts decide whether a retry with the
// same key is safe and what it returns.
const (
	// FaultTimeoutAfterCommit commits the request, stores its response under the
	// idempotency key, then waits Delay (longer than the client's timeout) before
	// answering. The client sees a timeout; the refund exists.
	FaultTimeoutAfterCommit FaultKind = "timeout_after_commit"
	// FaultDropAfterCommit commits and stores the response, then closes the connection
	// without answering.
	FaultDropAfterCommit FaultKind = "drop_after_commit"
	// FaultRateLimit answers 429 with a Retry-After header. Nothing is committed and
	// nothing is stored under the idempotency key.
	FaultRateLimit FaultKind = "rate_limit"
	// FaultServerError answers 500 api_error without committing and stores that 500 under
	// the idempotency key, as Stripe does: a replay with the key returns the same 500.
	FaultServerError FaultKind = "server_error"
	// FaultUnavailable answers 503 with Stripe-Should-Retry: true. Nothing is committed
	// and nothing is stored.
	FaultUnavailable FaultKind = "unavailable"
	// FaultRefuse answers 400 invalid_request_error charge_disputed without committing and
	// stores it under the key: a definite refusal, nothing refunded.
	FaultRefuse FaultKind = "refuse"
	// FaultSlow holds the idempotency key for Delay and then handles the request
	// normally, so a concurrent request with the same key meets idempotency_key_in_use.
	FaultSlow FaultKind = "slow"
)

// defaultTimeoutDelay is used by timeout_after_commit when no Delay is given. It is longer
// than stripe-go's default 80 s HTTP timeout so the client gives up first.
const defaultTimeoutDelay = 90 * time.Second

// stripeRules is the syntax of the fake Stripe's rules: they may name a method, and have
// neither chunk nor lag.
var stripeRules = ruleSyntax[FaultKind]{
	kinds: []FaultKind{
		FaultTimeoutAfterCommit, FaultDropAfterCommit, FaultRateLimit,
		FaultServerError, FaultUnavailable, FaultSlow, FaultRefuse,
	},
	methods: true,
}

// frontDoor reports whether the fault answers before the request reaches the idempotency
// layer, the way a load balancer or rate limiter would: such answers are never stored.
func (k FaultKind) frontDoor() bool {
	return k == FaultRateLimit || k == FaultUnavailable
}

// Fault is one fault-injection rule. A request matches the rule when its method and path
// match; the rule then fires according to Calls or Probability, at most Times times.
//
// Call numbers count the requests matching Method and Path on arrival, including those
// that end up being answered from the idempotency store. When several rules fire for one
// request, the first one added wins. Faults that act on execution (server_error, slow,
// timeout_after_commit, drop_after_commit) have no effect on a request answered from the
// idempotency store (a replay, 409 or parameter mismatch): Stripe never runs such a
// request, so it cannot fail while running it.
type Fault struct {
	// Method is an HTTP method such as "POST"; empty or "*" matches any.
	Method string `json:"method,omitempty"`
	// Path is a request path such as "/v1/refunds"; a trailing "*" matches a prefix;
	// empty or "*" matches any.
	Path string `json:"path,omitempty"`
	// Calls lists the 1-based numbers of matching requests the rule hits. Empty means
	// every matching request, subject to Probability.
	Calls []int `json:"calls,omitempty"`
	// Probability (0..1) is the chance the rule fires when Calls is empty; 0 means always.
	Probability float64 `json:"probability,omitempty"`
	// Kind is what happens when the rule fires.
	Kind FaultKind `json:"kind"`
	// Delay is how long slow and timeout_after_commit wait.
	Delay time.Duration `json:"-"`
	// RetryAfter is the Retry-After header value, in seconds, of a rate_limit answer.
	RetryAfter int `json:"retry_after,omitempty"`
	// Times caps how often the rule fires in total; 0 means no cap.
	Times int `json:"times,omitempty"`
}

// faultJSON carries Delay as a Go duration string ("300ms") so people can write it by hand
// in admin requests; a bare number is read as nanoseconds, as encoding/json would.
type faultJSON struct {
	Method      string          `json:"method,omitempty"`
	Path        string          `json:"path,omitempty"`
	Calls       []int           `json:"calls,omitempty"`
	Probability float64         `json:"probability,omitempty"`
	Kind        FaultKind       `json:"kind"`
	Delay       json.RawMessage `json:"delay,omitempty"`
	RetryAfter  int             `json:"retry_after,omitempty"`
	Times       int             `json:"times,omitempty"`
}

// MarshalJSON writes Delay as a duration string.
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{
		Method: f.Method, Path: f.Path, Calls: f.Calls, Probability: f.Probability,
		Kind: f.Kind, RetryAfter: f.RetryAfter, Times: f.Times,
	}
	if f.Delay != 0 {
		j.Delay = json.RawMessage(strconv.Quote(f.Delay.String()))
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads Delay as a duration string ("3s") or a number of nanoseconds.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*f = Fault{
		Method: j.Method, Path: j.Path, Calls: j.Calls, Probability: j.Probability,
		Kind: j.Kind, RetryAfter: j.RetryAfter, Times: j.Times,
	}
	if len(j.Delay) == 0 || string(j.Delay) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(j.Delay, &s); err == nil {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("fault delay: %w", err)
		}
		f.Delay = d
		return nil
	}
	var n int64
	if err := json.Unmarshal(j.Delay, &n); err != nil {
		return fmt.Errorf("fault delay: want a duration string or nanoseconds: %w", err)
	}
	f.Delay = time.Duration(n)
	return nil
}

// Validate reports whether the rule can be used.
func (f Fault) Validate() error {
	return stripeRules.check(rule[FaultKind]{method: f.Method, path: f.Path, kind: f.Kind, when: f.timing(),
		delay: f.Delay, retryAfter: f.RetryAfter})
}

// timing is the part of the rule that says which matching requests it hits.
func (f Fault) timing() when {
	return when{calls: f.Calls, probability: f.Probability, times: f.Times}
}

func (f Fault) matches(method, path string) bool {
	if f.Method != "" && f.Method != "*" && !strings.EqualFold(f.Method, method) {
		return false
	}
	switch {
	case f.Path == "" || f.Path == "*":
		return true
	case strings.HasSuffix(f.Path, "*"):
		return strings.HasPrefix(path, strings.TrimSuffix(f.Path, "*"))
	default:
		return f.Path == path
	}
}

// ParseFaults parses a compact fault specification, as given to `settle fake stripe
// --faults`. Rules are separated by ";" or newlines; blank rules are ignored.
//
//	spec    = rule { ( ";" | newline ) rule }
//	rule    = [ method ] [ path ] kind { option }
//	method  = an HTTP method such as POST or GET, or "*" for any (default any)
//	path    = "/..." exact, "/...*" prefix, or "*" for any (default any)
//	kind    = timeout_after_commit | drop_after_commit | rate_limit | server_error
//	        | unavailable | slow
//	option  = "p=" float          probability 0..1 when calls is not given (default 1)
//	        | "calls=" list       1-based numbers of matching requests, e.g. 3 or 1,4-6
//	        | "delay=" duration   Go duration, e.g. 300ms or 3s (slow, timeout_after_commit)
//	        | "retry_after=" int  seconds, sent as Retry-After with rate_limit
//	        | "times=" int        fire at most this many times in total
//
// Example:
//
//	POST /v1/refunds timeout_after_commit p=0.1 delay=3s; POST /v1/refunds server_error calls=3
func ParseFaults(spec string) ([]Fault, error) {
	return parseRules(spec, stripeRules, func(r rule[FaultKind]) Fault {
		return Fault{Method: r.method, Path: r.path, Kind: r.kind, Calls: r.calls, Probability: r.probability,
			Delay: r.delay, RetryAfter: r.retryAfter, Times: r.times}
	})
}
