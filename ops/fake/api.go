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
}

// endpoint runs with s.mu held, so a create and its ledger entry, charge update and events
// are one atomic step. Events it returns are delivered once the lock is released.
type endpoint func(req *apiRequest) (response, []*eventRecord)

// api wraps an endpoint in what every Stripe v1 request goes through, in Stripe's order:
// front door (auth, rate limits, outages), idempotency layer, execution, answer.
func (s *Stripe) api(ep endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		req := &apiRequest{
			method:    r.Method,
			path:      r.URL.Path,
			requestID: newID("req_"),
			pathID:    r.PathValue("id"),
		}
		h := w.Header()
		h.Set("Request-Id", req.requestID)
		h.Set("Content-Type", "application/json")
		h.Set("Stripe-Version", stripe.APIVersion)
		if v := r.Header.Get("Stripe-Version"); v != "" {
			h.Set("Stripe-Version", v)
		}
		outcome := "executed"
		var fault *Fault
		status := 0
		defer func() {
			attrs := []any{"method", r.Method, "path", r.URL.Path, "status", status,
				"request_id", req.requestID, "outcome", outcome, "dur", time.Since(start)}
			if req.idemKey != "" {
				attrs = append(attrs, "idempotency_key", req.idemKey)
			}
			if fault != nil {
				attrs = append(attrs, "fault", string(fault.Kind))
			}
			s.log.Info("fake stripe request", attrs...)
		}()
		write := func(resp response) {
			status = resp.status
			w.WriteHeader(resp.status)
			_, _ = w.Write(resp.body)
		}

		account, ok := accountOf(r)
		if !ok {
			outcome = "unauthorized"
			write(stripeError(http.StatusUnauthorized, "invalid_request_error", "", "",
				"You did not provide an API key. Provide it in the Authorization header as a Bearer token."))
			return
		}
		if r.Method == http.MethodPost {
			req.idemKey = strings.TrimSpace(r.Header.Get("Idempotency-Key"))
			if req.idemKey != "" {
				h.Set("Idempotency-Key", req.idemKey)
			}
		}
		params, resp, ok := parseParams(r)
		if !ok {
			outcome = "bad_form"
			write(resp)
			return
		}
		req.params = params

		fault = s.pickFault(r.Method, r.URL.Path)
		if fault != nil && fault.Kind.frontDoor() {
			outcome = "fault"
			write(frontDoorFault(h, *fault))
			return
		}
		if len(req.idemKey) > 255 {
			outcome = "bad_key"
			write(invalid("", "", "Idempotency keys can be no longer than 255 characters."))
			return
		}

		scope := ""
		if req.idemKey != "" {
			scope = account + "\x00" + r.Method + " " + r.URL.Path + "\x00" + req.idemKey
			fp := fingerprint(params)
			s.mu.Lock()
			now := s.clock()
			s.pruneKeysLocked(now)
			if found, ok := s.keys[scope]; ok {
				e := *found // the entry changes once its request finishes
				s.mu.Unlock()
				switch {
				case e.fingerprint != fp:
					outcome = "key_mismatch"
					write(stripeError(http.StatusBadRequest, "idempotency_error", "", "",
						"Keys for idempotent requests can only be used with the same parameters they were first used with. "+
							"Try using a key other than '"+req.idemKey+"' if you meant to execute a different request."))
				case e.inFlight:
					outcome = "key_in_use"
					write(stripeError(http.StatusConflict, "idempotency_error", "idempotency_key_in_use", "",
						"There is currently another in-progress request using this Idempotent Key (probably because of a timeout). "+
							"Please try again later."))
				default:
					outcome = "replayed"
					h.Set("Idempotent-Replayed", "true")
					h.Set("Original-Request", e.requestID)
					write(e.resp)
				}
				return
			}
			s.keys[scope] = &keyEntry{fingerprint: fp, inFlight: true, requestID: req.requestID, created: now}
			s.mu.Unlock()
		}
		release := func() {
			if scope != "" {
				s.mu.Lock()
				delete(s.keys, scope)
				s.mu.Unlock()
			}
		}

		if fault != nil && fault.Kind == FaultSlow {
			// A real server keeps working after the client gives up, so only Close
			// interrupts the wait.
			if !s.sleep(context.Background(), fault.Delay) {
				release()
				outcome = "closed"
				dropConnection(w)
				return
			}
		}

		var events []*eventRecord
		s.mu.Lock()
		req.now = s.clock()
		if fault != nil && fault.Kind == FaultServerError {
			outcome = "fault"
			resp = stripeError(http.StatusInternalServerError, "api_error", "", "",
				"An unknown error occurred while processing your request.")
		} else if fault != nil && fault.Kind == FaultRefuse {
			outcome = "fault"
			resp = stripeError(http.StatusBadRequest, "invalid_request_error", "charge_disputed", "charge",
				"This charge is disputed and cannot be refunded.")
		} else {
			resp, events = ep(req)
		}
		if scope != "" {
			if resp.transient {
				delete(s.keys, scope)
			} else {
				e := s.keys[scope]
				e.inFlight = false
				e.resp = resp
			}
		}
		s.mu.Unlock()
		for _, ev := range events {
			s.deliverAsync(ev)
		}

		if fault != nil {
			switch fault.Kind {
			case FaultTimeoutAfterCommit:
				outcome = "fault"
				d := fault.Delay
				if d == 0 {
					d = defaultTimeoutDelay
				}
				if !s.sleep(r.Context(), d) {
					// Returning without writing would send an empty 200.
					dropConnection(w)
					return
				}
			case FaultDropAfterCommit:
				outcome = "fault"
				dropConnection(w)
				return
			}
		}
		write(resp)
	}
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
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	case <-ctx.Done():
		return false
	}
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
