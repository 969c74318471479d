package fake

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
)

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix plus 24 random alphanumerics, the shape of Stripe's ids. It uses
// crypto/rand rather than the seeded source so ids never collide across fakes with the
// same seed (a demo restart must not reuse a refund id).
func newID(prefix string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails on supported platforms
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + string(b)
}

// obj is a JSON object whose keys are written in sorted order, good enough for Stripe's
// decoders, which do not care about order.
type obj = map[string]any

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func metadataObject(m map[string]string) obj {
	out := obj{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func refundObject(r *Refund) obj {
	o := obj{
		"id":                          r.ID,
		"object":                      "refund",
		"amount":                      r.Amount,
		"balance_transaction":         nil,
		"charge":                      r.Charge,
		"created":                     r.Created.Unix(),
		"currency":                    r.Currency,
		"destination_details":         nil,
		"metadata":                    metadataObject(r.Metadata),
		"payment_intent":              nullable(r.PaymentIntent),
		"reason":                      nullable(r.Reason),
		"receipt_number":              nil,
		"source_transfer_reversal":    nil,
		"status":                      r.Status,
		"transfer_reversal":           nil,
		"failure_balance_transaction": nil,
	}
	if r.FailureReason != "" {
		o["failure_reason"] = r.FailureReason
	}
	return o
}

// listedRefund is refundObject as a struct, for listings: the same JSON byte for byte (its
// fields in the sorted order a map's keys are written in), several times cheaper to encode,
// which a listing of a million refunds feels. A test keeps the two equal.
type listedRefund struct {
	Amount                    int64             `json:"amount"`
	BalanceTransaction        any               `json:"balance_transaction"`
	Charge                    string            `json:"charge"`
	Created                   int64             `json:"created"`
	Currency                  string            `json:"currency"`
	DestinationDetails        any               `json:"destination_details"`
	FailureBalanceTransaction any               `json:"failure_balance_transaction"`
	FailureReason             string            `json:"failure_reason,omitempty"`
	ID                        string            `json:"id"`
	Metadata                  map[string]string `json:"metadata"`
	Object                    string            `json:"object"`
	PaymentIntent             *string           `json:"payment_intent"`
	Reason                    *string           `json:"reason"`
	ReceiptNumber             any               `json:"receipt_number"`
	SourceTransferReversal    any               `json:"source_transfer_reversal"`
	Status                    string            `json:"status"`
	TransferReversal          any               `json:"transfer_reversal"`
}

func listedRefundOf(r *Refund) listedRefund {
	md := r.Metadata
	if md == nil {
		md = map[string]string{}
	}
	orNil := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return listedRefund{Amount: r.Amount, Charge: r.Charge, Created: r.Created.Unix(), Currency: r.Currency,
		FailureReason: r.FailureReason, ID: r.ID, Metadata: md, Object: "refund", PaymentIntent: orNil(r.PaymentIntent),
		Reason: orNil(r.Reason), Status: r.Status}
}

func chargeObject(c *charge) obj {
	return obj{
		"id":                  c.id,
		"object":              "charge",
		"amount":              c.amount,
		"amount_captured":     c.amount,
		"amount_refunded":     c.amountRefunded,
		"captured":            true,
		"created":             c.created.Unix(),
		"currency":            c.currency,
		"livemode":            false,
		"metadata":            obj{},
		"paid":                true,
		"payment_intent":      c.paymentIntent,
		"refunded":            c.amountRefunded >= c.amount,
		"status":              "succeeded",
		"balance_transaction": nil,
		"disputed":            false,
	}
}

func paymentIntentObject(pi *paymentIntent, latestCharge any) obj {
	return obj{
		"id":                   pi.id,
		"object":               "payment_intent",
		"amount":               pi.amount,
		"amount_capturable":    0,
		"amount_received":      pi.amount,
		"capture_method":       "automatic",
		"created":              pi.created.Unix(),
		"currency":             pi.currency,
		"latest_charge":        latestCharge,
		"livemode":             false,
		"metadata":             metadataObject(pi.metadata),
		"payment_method_types": []string{"card"},
		"status":               "succeeded",
	}
}

// response is an answer ready to be written and, for POSTs, stored under an idempotency
// key.
type response struct {
	status int
	body   []byte
	// transient marks answers Stripe does not save under the key: the request failed
	// validation before the endpoint began executing.
	transient bool
}

func jsonResponse(status int, v any) response {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own maps reach here; a failure is a bug in this package.
		panic("fake stripe: encoding response: " + err.Error())
	}
	return response{status: status, body: append(b, '\n')}
}

// stripeError builds Stripe's error envelope.
func stripeError(status int, typ, code, param, msg string) response {
	e := obj{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
		e["doc_url"] = "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(code, "_", "-")
	}
	if param != "" {
		e["param"] = param
	}
	return jsonResponse(status, obj{"error": e})
}

// invalid is a parameter-validation failure: 400, not saved under the idempotency key.
func invalid(code, param, msg string) response {
	r := stripeError(http.StatusBadRequest, "invalid_request_error", code, param, msg)
	r.transient = true
	return r
}

func notFound(param, kind, id string) response {
	return stripeError(http.StatusNotFound, "invalid_request_error", "resource_missing", param,
		"No such "+kind+": '"+id+"'")
}
