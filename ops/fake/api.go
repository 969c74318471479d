package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
)

// keyEntry is what the idempotency layer remembers about one key.
type keyEntry struct {
	fingerprint string
	inFlight    bool
	resp        response
	requestID   string // of the request that ran, sent back as Original-Request
	created     time.Time
}

// apiRequest is one Stripe API request after authentication and parameter parsing.
type apiRequest struct {
	method    string
	path      string
	params    url.Values
	requestID string
	idemKey   string
	pathID    string // the {id} path segment, if any
	now       time.Time
	// account is the connected account of Stripe-Account, "" for the platform account.
	account string
}

// endpoint runs with s.mu held, so a create and its ledger entry, charge update and events
// are one atomic step. Events it returns are delivered once the lock is released.
type endpoint func(req *apiRequest) (response, []*eventRecord)

// apiCall is one request on its way through api: where it answers, and what its log line says.
type apiCall struct {
	w       http.ResponseWriter
	r       *http.Request
	req     *apiRequest
	start   time.Time
	outcome string
	fault   *Fault
	status  int
	scope   string // the idempotency key's scope, "" for a request without a key
}

// api wraps an endpoint in what every Stripe v1 request goes through, in Stripe's order:
// front door (auth, rate limits, outages), idempotency layer, execution, answer.
func (s *Stripe) api(ep endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := newAPICall(w, r)
		defer s.logCall(c)
		account, ok := s.frontDoor(c)
		if !ok || !s.claimKey(c, account) {
			return
		}
		if c.fault != nil && c.fault.Kind == FaultSlow {
			// A real server keeps working after the client gives up, so only Close
			// interrupts the wait.
			if !s.sleep(context.Background(), c.fault.Delay) {
				s.releaseKey(c.scope)
				c.outcome = "closed"
				dropConnection(w)
				return
			}
		}
		resp := s.execute(c, ep)
		if s.faultAfterCommit(c) {
			return
		}
		c.write(resp)
	}
}

// newAPICall starts a call: its request id, and the headers every answer carries.
func newAPICall(w http.ResponseWriter, r *http.Request) *apiCall {
	c := &apiCall{
		w: w,
		r: r,
		req: &apiRequest{
			method:    r.Method,
			path:      r.URL.Path,
			requestID: newID("req_"),
			pathID:    r.PathValue("id"),
		},
		start:   time.Now(),
		outcome: "executed",
	}
	h := w.Header()
	h.Set("Request-Id", c.req.requestID)
	h.Set("Content-Type", "application/json")
	h.Set("Stripe-Version", stripe.APIVersion)
	if v := r.Header.Get("Stripe-Version"); v != "" {
		h.Set("Stripe-Version", v)
	}
	return c
}

// write sends resp as the call's answer.
func (c *apiCall) write(resp response) {
	c.status = resp.status
	c.w.WriteHeader(resp.status)
	_, _ = c.w.Write(resp.body)
}

// refuse ends the call with resp, logged as outcome.
func (c *apiCall) refuse(outcome string, resp response) {
	c.outcome = outcome
	c.write(resp)
}

// logCall writes the call's one log line.
func (s *Stripe) logCall(c *apiCall) {
	s.recordCall(Call{Method: c.r.Method, Path: c.r.URL.Path, Account: strings.TrimSpace(c.r.Header.Get("Stripe-Account")),
		Status: c.status, Outcome: c.outcome})
	attrs := []any{"method", c.r.Method, "path", c.r.URL.Path, "status", c.status,
		"request_id", c.req.requestID, "outcome", c.outcome, "dur", time.Since(c.start)}
	if c.req.idemKey != "" {
		attrs = append(attrs, "idempotency_key", c.req.idemKey)
	}
	if c.fault != nil {
		attrs = append(attrs, "fault", string(c.fault.Kind))
	}
	s.log.Info("fake stripe request", attrs...)
}

// frontDoor authenticates the call, parses its parameters and applies front-door faults and
// the key length limit. It returns the caller's account, or false once it has answered.
func (s *Stripe) frontDoor(c *apiCall) (string, bool) {
	r, req := c.r, c.req
	account, ok := accountOf(r)
	if !ok {
		c.refuse("unauthorized", stripeError(http.StatusUnauthorized, "invalid_request_error", "", "",
			"You did not provide an API key. Provide it in the Authorization header as a Bearer token."))
		return "", false
	}
	req.account = strings.TrimSpace(r.Header.Get("Stripe-Account"))
	if !validAccount(req.account) {
		c.refuse("no_access", stripeError(http.StatusForbidden, "invalid_request_error", "account_invalid", "",
			"The provided key does not have access to account '"+req.account+"' (or that account does not exist)."))
		return "", false
	}
	if r.Method == http.MethodPost {
		req.idemKey = strings.TrimSpace(r.Header.Get("Idempotency-Key"))
		if req.idemKey != "" {
			c.w.Header().Set("Idempotency-Key", req.idemKey)
		}
	}
	params, resp, ok := parseParams(r)
	if !ok {
		c.refuse("bad_form", resp)
		return "", false
	}
	req.params = params

	c.fault = s.pickFault(r.Method, r.URL.Path)
	if c.fault != nil && c.fault.Kind.frontDoor() {
		c.refuse("fault", frontDoorFault(c.w.Header(), *c.fault))
		return "", false
	}
	if len(req.idemKey) > 255 {
		c.refuse("bad_key", invalid("", "", "Idempotency keys can be no longer than 255 characters."))
		return "", false
	}
	return account, true
}

// claimKey is the idempotency layer: a call with a key the account used before is answered
// from that key (refused, or replayed) and claimKey returns false; otherwise the key is
// recorded as in flight and the call goes on.
func (s *Stripe) claimKey(c *apiCall, account string) bool {
	req := c.req
	if req.idemKey == "" {
		return true
	}
	c.scope = account + "\x00" + c.r.Method + " " + c.r.URL.Path + "\x00" + req.idemKey
	fp := fingerprint(req.params)
	s.mu.Lock()
	now := s.clock()
	s.pruneKeysLocked(now)
	found, ok := s.keys[c.scope]
	if !ok {
		s.keys[c.scope] = &keyEntry{fingerprint: fp, inFlight: true, requestID: req.requestID, created: now}
		s.mu.Unlock()
		return true
	}
	e := *found // the entry changes once its request finishes
	s.mu.Unlock()
	switch {
	case e.fingerprint != fp:
		c.refuse("key_mismatch", stripeError(http.StatusBadRequest, "idempotency_error", "", "",
			"Keys for idempotent requests can only be used with the same parameters they were first used with. "+
				"Try using a key other than '"+req.idemKey+"' if you meant to execute a different request."))
	case e.inFlight:
		c.refuse("key_in_use", stripeError(http.StatusConflict, "idempotency_error", "idempotency_key_in_use", "",
			"There is currently another in-progress request using this Idempotent Key (probably because of a timeout). "+
				"Please try again later."))
	default:
		h := c.w.Header()
		h.Set("Idempotent-Replayed", "true")
		h.Set("Original-Request", e.requestID)
		c.refuse("replayed", e.resp)
	}
	return false
}

// releaseKey forgets a key claimed for a call that did not run.
func (s *Stripe) releaseKey(scope string) {
	if scope != "" {
		s.mu.Lock()
		delete(s.keys, scope)
		s.mu.Unlock()
	}
}

// execute runs the endpoint (or the fault standing in for it) with s.mu held, saves its
// answer under the call's key, and delivers the events it made once the lock is released.
func (s *Stripe) execute(c *apiCall, ep endpoint) response {
	var resp response
	var events []*eventRecord
	s.mu.Lock()
	c.req.now = s.clock()
	if c.fault != nil && c.fault.Kind == FaultServerError {
		c.outcome = "fault"
		resp = stripeError(http.StatusInternalServerError, "api_error", "", "",
			"An unknown error occurred while processing your request.")
	} else if c.fault != nil && c.fault.Kind == FaultRefuse {
		c.outcome = "fault"
		resp = stripeError(http.StatusBadRequest, "invalid_request_error", "charge_disputed", "charge",
			"This charge is disputed and cannot be refunded.")
	} else {
		resp, events = ep(c.req)
	}
	if c.scope != "" {
		if resp.transient {
			delete(s.keys, c.scope)
		} else {
			e := s.keys[c.scope]
			e.inFlight = false
			e.resp = resp
		}
	}
	s.mu.Unlock()
	for _, ev := range events {
		s.deliverAsync(ev)
	}
	return resp
}

// faultAfterCommit applies a fault that strikes once the work is done: a timeout or a
// dropped connection. It reports whether the call is over without an answer.
func (s *Stripe) faultAfterCommit(c *apiCall) bool {
	if c.fault == nil {
		return false
	}
	switch c.fault.Kind {
	case FaultTimeoutAfterCommit:
		c.outcome = "fault"
		d := c.fault.Delay
		if d == 0 {
			d = defaultTimeoutDelay
		}
		if !s.sleep(c.r.Context(), d) {
			// Returning without writing would send an empty 200.
			dropConnection(c.w)
			return true
		}
	case FaultDropAfterCommit:
		c.outcome = "fault"
		dropConnection(c.w)
		return true
	}
	return false
}

// frontDoorFault answers a rate_limit or unavailable fault.
func frontDoorFault(h http.Header, f Fault) response {
	if f.Kind == FaultRateLimit {
		retry := f.RetryAfter
		if retry <= 0 {
			retry = 1
		}
		h.Set("Retry-After", strconv.Itoa(retry))
		// Stripe reports rate limiting as an invalid_request_error with code rate_limit;
		// stripe-go v76 has no separate error type for it.
		return stripeError(http.StatusTooManyRequests, "invalid_request_error", "rate_limit", "",
			"Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.")
	}
	h.Set("Stripe-Should-Retry", "true")
	return stripeError(http.StatusServiceUnavailable, "api_error", "", "",
		"Stripe is temporarily unavailable. Please try again.")
}

// dropConnection closes the client's connection without a response, the way a load
// balancer or a crashed process would after the work was done.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2, recorders): aborting the handler resets the stream.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// sleep waits d and reports whether it ran to the end; Close or ctx cut it short.
func (s *Stripe) sleep(ctx context.Context, d time.Duration) bool {
	return sleepUnless(ctx, s.done, d)
}

// pruneKeysLocked forgets finished keys older than the retention window. Keys still in
// flight stay: their request has not answered yet.
func (s *Stripe) pruneKeysLocked(now time.Time) {
	for k, e := range s.keys {
		if !e.inFlight && now.Sub(e.created) >= s.retention {
			delete(s.keys, k)
		}
	}
}

// accountOf returns the account an API key stands for. Keys are scoped per account, and
// each distinct API key (plus Stripe-Account for Connect) is one account in the fake.
func accountOf(r *http.Request) (string, bool) {
	key := ""
	if user, _, ok := r.BasicAuth(); ok {
		key = user
	} else if auth := r.Header.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") {
		key = strings.TrimSpace(strings.TrimPrefix(auth, "Bearer "))
	}
	if key == "" {
		return "", false
	}
	return key + "/" + r.Header.Get("Stripe-Account"), true
}

// parseParams reads form parameters: the body for POST, the query string otherwise, as
// stripe-go sends them.
func parseParams(r *http.Request) (url.Values, response, bool) {
	if r.Method != http.MethodPost {
		return r.URL.Query(), response{}, true
	}
	if err := r.ParseForm(); err != nil {
		return nil, invalid("", "", "Could not parse the request body as application/x-www-form-urlencoded."), false
	}
	return r.PostForm, response{}, true
}

// fingerprint identifies a request's parameters for the idempotency layer. url.Values
// encodes keys in sorted order, so the order stripe-go writes maps in does not matter.
func fingerprint(params url.Values) string {
	sum := sha256.Sum256([]byte(params.Encode()))
	return hex.EncodeToString(sum[:])
}
