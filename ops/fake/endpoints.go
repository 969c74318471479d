package fake

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

func (s *Stripe) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/refunds", s.api(s.createRefund))
	mux.HandleFunc("GET /v1/refunds", s.api(s.listRefunds))
	mux.HandleFunc("GET /v1/refunds/{id}", s.api(s.retrieveRefund))
	mux.HandleFunc("GET /v1/payment_intents/{id}", s.api(s.retrievePaymentIntent))
	mux.HandleFunc("GET /v1/charges/{id}", s.api(s.retrieveCharge))
	mux.HandleFunc("GET /v1/events", s.api(s.listEvents))
	mux.HandleFunc("GET /v1/events/{id}", s.api(s.retrieveEvent))

	mux.HandleFunc("GET /_fake/ledger", s.adminLedger)
	mux.HandleFunc("GET /_fake/calls", s.adminCalls)
	mux.HandleFunc("POST /_fake/payment_intents", s.adminAddPaymentIntent)
	mux.HandleFunc("GET /_fake/faults", s.adminListFaults)
	mux.HandleFunc("POST /_fake/faults", s.adminAddFaults)
	mux.HandleFunc("DELETE /_fake/faults", s.adminClearFaults)
	mux.HandleFunc("POST /_fake/refunds/{id}/status", s.adminRefundStatus)
	mux.HandleFunc("GET /_fake/events", s.adminEvents)
	mux.HandleFunc("POST /_fake/events/{id}/resend", s.adminResendEvent)

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Request-Id", newID("req_"))
		w.Header().Set("Content-Type", "application/json")
		resp := stripeError(http.StatusNotFound, "invalid_request_error", "", "",
			fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, r.URL.Path))
		w.WriteHeader(resp.status)
		_, _ = w.Write(resp.body)
	})
	return mux
}

// refundParams are the parameters POST /v1/refunds accepts. The fake models only some of
// them, but refusing the rest would break callers that Stripe serves.
var refundParams = map[string]bool{
	"amount": true, "charge": true, "currency": true, "customer": true,
	"instructions_email": true, "metadata": true, "origin": true, "payment_intent": true,
	"reason": true, "refund_application_fee": true, "reverse_transfer": true, "expand": true,
}

// paramName strips a bracketed suffix: "metadata[order]" → "metadata".
func paramName(key string) string {
	if i := strings.IndexByte(key, '['); i >= 0 {
		return key[:i]
	}
	return key
}

// bracketKeys collects name[key]=value parameters, as stripe-go encodes maps.
func bracketKeys(params url.Values, name string) map[string]string {
	out := map[string]string{}
	prefix := name + "["
	for k, vs := range params {
		if !strings.HasPrefix(k, prefix) || !strings.HasSuffix(k, "]") || len(vs) == 0 {
			continue
		}
		out[k[len(prefix):len(k)-1]] = vs[len(vs)-1]
	}
	return out
}

// expands collects expand[0]=a, expand[]=a and expand=a into a set.
func expands(params url.Values) map[string]bool {
	out := map[string]bool{}
	for k, vs := range params {
		if paramName(k) != "expand" {
			continue
		}
		for _, v := range vs {
			if v != "" {
				out[v] = true
			}
		}
	}
	return out
}

// refundRequest is a POST /v1/refunds whose parameters passed the checks Stripe makes before
// it executes anything.
type refundRequest struct {
	amount    int64 // when hasAmount; otherwise the refund takes what is left on the charge
	hasAmount bool
	piID      string
	chID      string
	currency  string // lower case; "" when not given
	reason    string
	metadata  map[string]string
}

func (s *Stripe) createRefund(req *apiRequest) (response, []*eventRecord) {
	p := req.params
	rr, resp, ok := parseRefundParams(p)
	if !ok {
		return resp, nil
	}
	// From here on the endpoint is executing, so Stripe saves whatever it answers.
	ch, resp, ok := s.refundedCharge(req.account, rr)
	if !ok {
		return resp, nil
	}
	amount := rr.amount
	remaining := ch.amount - ch.amountRefunded
	if remaining <= 0 {
		return stripeError(http.StatusBadRequest, "invalid_request_error", "charge_already_refunded", "",
			fmt.Sprintf("Charge %s has already been refunded.", ch.id)), nil
	}
	if !rr.hasAmount {
		amount = remaining
	}
	if amount > remaining {
		return stripeError(http.StatusBadRequest, "invalid_request_error", "amount_too_large", "amount",
			fmt.Sprintf("Refund amount (%s) is greater than unrefunded amount on charge (%s)",
				money(amount, ch.currency), money(remaining, ch.currency))), nil
	}

	r := &Refund{
		ID:             newID("re_"),
		PaymentIntent:  ch.paymentIntent,
		Charge:         ch.id,
		Currency:       ch.currency,
		Status:         map[bool]string{true: "pending", false: "succeeded"}[s.pendingRefunds],
		Reason:         rr.reason,
		Amount:         amount,
		Metadata:       rr.metadata,
		Created:        req.now,
		IdempotencyKey: req.idemKey,
		Account:        req.account,
	}
	s.addRefundLocked(r)
	ch.amountRefunded += amount

	events := []*eventRecord{
		s.newEventLocked(req.account, "refund.created", refundObject(r), nil, req.requestID, req.idemKey),
		s.newEventLocked(req.account, "charge.refunded", chargeObject(ch), obj{"amount_refunded": ch.amountRefunded - amount},
			req.requestID, req.idemKey),
	}
	return jsonResponse(http.StatusOK, s.refundWithExpand(r, expands(p), "")), events
}

// parseRefundParams checks a refund's parameters before anything executes. Its refusals are
// invalid-request answers, which Stripe does not save under the idempotency key.
func parseRefundParams(p url.Values) (refundRequest, response, bool) {
	for k := range p {
		if !refundParams[paramName(k)] {
			return refundRequest{}, invalid("parameter_unknown", k, "Received unknown parameter: "+k), false
		}
	}
	rr := refundRequest{hasAmount: p.Get("amount") != ""}
	if rr.hasAmount {
		n, err := strconv.ParseInt(p.Get("amount"), 10, 64)
		if err != nil || n <= 0 {
			return refundRequest{}, invalid("parameter_invalid_integer", "amount", "Invalid positive integer"), false
		}
		rr.amount = n
	}
	rr.piID, rr.chID = p.Get("payment_intent"), p.Get("charge")
	if rr.piID == "" && rr.chID == "" {
		return refundRequest{}, invalid("parameter_missing", "",
			"One of the following params should be provided for this request: payment_intent or charge."), false
	}
	rr.currency = strings.ToLower(p.Get("currency"))
	rr.reason = p.Get("reason")
	switch rr.reason {
	case "", "duplicate", "fraudulent", "requested_by_customer":
	default:
		return refundRequest{}, invalid("", "reason",
			"Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer"), false
	}
	rr.metadata = map[string]string{}
	for k, v := range bracketKeys(p, "metadata") {
		if len(k) > 40 || len(v) > 500 {
			return refundRequest{}, invalid("", "metadata", "Metadata keys can be at most 40 characters and values at most 500 characters."), false
		}
		if v != "" { // an empty value unsets the key; on create there is nothing to unset
			rr.metadata[k] = v
		}
	}
	if len(rr.metadata) > 50 {
		return refundRequest{}, invalid("", "metadata", "Metadata can have at most 50 keys."), false
	}
	return rr, response{}, true
}

// refundedCharge finds the charge a refund is for, by its payment intent, its charge or both,
// in the caller's account, and checks that the two agree and that the currency, if given,
// is the charge's. Another account's payment is as missing as one that does not exist.
func (s *Stripe) refundedCharge(account string, rr refundRequest) (*charge, response, bool) {
	var ch *charge
	if rr.piID != "" {
		pi, ok := s.intents[rr.piID]
		if !ok || pi.account != account {
			return nil, notFound("payment_intent", "payment_intent", rr.piID), false
		}
		ch = s.charges[pi.charge]
	}
	if rr.chID != "" {
		c, ok := s.charges[rr.chID]
		if !ok || c.account != account {
			return nil, notFound("charge", "charge", rr.chID), false
		}
		if ch != nil && ch != c {
			return nil, stripeError(http.StatusBadRequest, "invalid_request_error", "", "charge",
				fmt.Sprintf("Charge %s does not belong to PaymentIntent %s.", rr.chID, rr.piID)), false
		}
		ch = c
	}
	if rr.currency != "" && rr.currency != ch.currency {
		return nil, stripeError(http.StatusBadRequest, "invalid_request_error", "", "currency",
			fmt.Sprintf("Currency %s does not match the charge's currency %s.", rr.currency, ch.currency)), false
	}
	return ch, response{}, true
}

// money formats an amount the way Stripe's messages do for two-decimal currencies.
func money(cents int64, currency string) string {
	return fmt.Sprintf("%d.%02d %s", cents/100, cents%100, strings.ToUpper(currency))
}

func (s *Stripe) refundWithExpand(r *Refund, exp map[string]bool, prefix string) obj {
	o := refundObject(r)
	if exp[prefix+"charge"] {
		o["charge"] = chargeObject(s.charges[r.Charge])
	}
	if exp[prefix+"payment_intent"] && r.PaymentIntent != "" {
		if pi, ok := s.intents[r.PaymentIntent]; ok {
			o["payment_intent"] = paymentIntentObject(pi, pi.charge)
		}
	}
	return o
}

func (s *Stripe) retrieveRefund(req *apiRequest) (response, []*eventRecord) {
	r, ok := s.refundBy[req.pathID]
	if !ok || r.Account != req.account {
		return notFound("id", "refund", req.pathID), nil
	}
	return jsonResponse(http.StatusOK, s.refundWithExpand(r, expands(req.params), "")), nil
}

func (s *Stripe) listRefunds(req *apiRequest) (response, []*eventRecord) {
	p := req.params
	piID, chID := p.Get("payment_intent"), p.Get("charge")
	exp := expands(p)
	// Newest first from the cursor down, stopping once a page and one more are found: a page
	// costs the same at the millionth refund as at the first. Paging backwards (ending_before)
	// walks everything, as it is rare.
	start, stop := len(s.refunds)-1, -1
	if after := p.Get("starting_after"); after != "" && p.Get("ending_before") == "" {
		if pos, ok := s.refundPos[after]; ok {
			start = pos - 1
		}
	}
	created, _, _ := createdFilter(p)
	plain := !exp["data.charge"] && !exp["data.payment_intent"]
	var items []listItem
	for i := start; i > stop; i-- {
		r := s.refunds[i]
		if r.Account != req.account || (piID != "" && r.PaymentIntent != piID) || (chID != "" && r.Charge != chID) ||
			(created != nil && !created(r.Created.Unix())) {
			continue
		}
		items = append(items, listItem{id: r.ID, pos: i, created: r.Created.Unix(),
			render: func() any {
				if plain {
					return listedRefundOf(r)
				}
				return s.refundWithExpand(r, exp, "data.")
			}})
		if p.Get("ending_before") == "" && len(items) > maxListLimit {
			break
		}
	}
	return listResponse(req, "/v1/refunds", items, func(id string) (int, bool) {
		pos, ok := s.refundPos[id]
		if !ok || s.refunds[pos].Account != req.account {
			return 0, false
		}
		return pos, true
	}, "refund"), nil
}

func (s *Stripe) retrievePaymentIntent(req *apiRequest) (response, []*eventRecord) {
	pi, ok := s.intents[req.pathID]
	if !ok || pi.account != req.account {
		return notFound("intent", "payment_intent", req.pathID), nil
	}
	var latest any = pi.charge
	if expands(req.params)["latest_charge"] {
		latest = chargeObject(s.charges[pi.charge])
	}
	return jsonResponse(http.StatusOK, paymentIntentObject(pi, latest)), nil
}

func (s *Stripe) retrieveCharge(req *apiRequest) (response, []*eventRecord) {
	ch, ok := s.charges[req.pathID]
	if !ok || ch.account != req.account {
		return notFound("id", "charge", req.pathID), nil
	}
	o := chargeObject(ch)
	if expands(req.params)["payment_intent"] {
		pi := s.intents[ch.paymentIntent]
		o["payment_intent"] = paymentIntentObject(pi, pi.charge)
	}
	return jsonResponse(http.StatusOK, o), nil
}

func (s *Stripe) retrieveEvent(req *apiRequest) (response, []*eventRecord) {
	ev, ok := s.eventBy[req.pathID]
	if !ok || ev.account != req.account {
		return notFound("id", "event", req.pathID), nil
	}
	return response{status: http.StatusOK, body: append([]byte(nil), ev.Payload...)}, nil
}

func (s *Stripe) listEvents(req *apiRequest) (response, []*eventRecord) {
	typ := req.params.Get("type")
	var items []listItem
	for i := len(s.events) - 1; i >= 0; i-- {
		ev := s.events[i]
		if ev.account != req.account || (typ != "" && !eventTypeMatches(typ, ev.Type)) {
			continue
		}
		items = append(items, listItem{id: ev.ID, pos: i, created: ev.Created.Unix(),
			render: func() any { return rawJSON(ev.Payload) }})
	}
	return listResponse(req, "/v1/events", items, func(id string) (int, bool) {
		for i, ev := range s.events {
			if ev.ID == id && ev.account == req.account {
				return i, true
			}
		}
		return 0, false
	}, "event"), nil
}

// eventTypeMatches supports Stripe's "refund.*" wildcard.
func eventTypeMatches(filter, typ string) bool {
	if prefix, ok := strings.CutSuffix(filter, "*"); ok {
		return strings.HasPrefix(typ, prefix)
	}
	return filter == typ
}
