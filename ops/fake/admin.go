package fake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// The /_fake routes are not Stripe's: they let tests and `settle fake stripe` seed data,
// inspect the ledger and steer faults over HTTP. Their errors are {"error": "..."}.

const adminBodyLimit = 1 << 20

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func adminError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, adminBodyLimit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding JSON body: %w", err)
	}
	return nil
}

func (s *Stripe) adminLedger(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Refunds())
}

// adminAddPaymentIntent seeds a payment intent, in the connected account "account" names
// (acct_…) or in the platform account when it is absent.
func (s *Stripe) adminAddPaymentIntent(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Account  string            `json:"account"`
		ID       string            `json:"id"`
		Amount   int64             `json:"amount"`
		Currency string            `json:"currency"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := decodeJSON(r, &in); err != nil {
		adminError(w, http.StatusBadRequest, err)
		return
	}
	if !validAccount(in.Account) {
		adminError(w, http.StatusBadRequest, fmt.Errorf("account %q: want acct_ followed by letters and digits, or none for the platform", in.Account))
		return
	}
	pi, created, err := s.addPaymentIntent(in.Account, in.ID, in.Amount, in.Currency, in.Metadata)
	if err != nil {
		status := http.StatusBadRequest
		if pi != nil {
			status = http.StatusConflict
		}
		adminError(w, status, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	s.mu.Lock()
	body := paymentIntentObject(pi, pi.charge)
	s.mu.Unlock()
	writeJSON(w, status, body)
}

func (s *Stripe) adminListFaults(w http.ResponseWriter, _ *http.Request) {
	writeFaults(w, s.Faults())
}

// adminAddFaults appends rules given as a JSON array of Fault, or, with Content-Type
// text/plain, as a ParseFaults spec.
func (s *Stripe) adminAddFaults(w http.ResponseWriter, r *http.Request) {
	addFaults(w, r, ParseFaults, s.AddFault, s.Faults)
}

// addFaults appends the rules of an admin request to either fake (see readFaults) with add,
// then answers with all the rules list returns.
func addFaults[F interface{ Validate() error }](w http.ResponseWriter, r *http.Request, parse func(string) ([]F, error), add func(F), list func() []F) {
	faults, ok := readFaults(w, r, parse)
	if !ok {
		return
	}
	for _, f := range faults {
		add(f)
	}
	writeFaults(w, list())
}

// writeFaults answers with either fake's fault rules as a JSON array, [] when there are none.
func writeFaults[F any](w http.ResponseWriter, faults []F) {
	if faults == nil {
		faults = []F{}
	}
	writeJSON(w, http.StatusOK, faults)
}

// readFaults reads the fault rules of an admin request to either fake: a JSON array, or,
// with Content-Type text/plain, a spec for parse. Every rule must pass Validate; when one
// does not, or the body cannot be read, it answers 400 itself and returns false.
func readFaults[F interface{ Validate() error }](w http.ResponseWriter, r *http.Request, parse func(string) ([]F, error)) ([]F, bool) {
	var faults []F
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "text/plain" {
		b, err := io.ReadAll(io.LimitReader(r.Body, adminBodyLimit))
		if err != nil {
			adminError(w, http.StatusBadRequest, fmt.Errorf("reading body: %w", err))
			return nil, false
		}
		if faults, err = parse(string(b)); err != nil {
			adminError(w, http.StatusBadRequest, err)
			return nil, false
		}
	} else if err := decodeJSON(r, &faults); err != nil {
		adminError(w, http.StatusBadRequest, err)
		return nil, false
	}
	for i, f := range faults {
		if err := f.Validate(); err != nil {
			adminError(w, http.StatusBadRequest, fmt.Errorf("fault %d: %w", i+1, err))
			return nil, false
		}
	}
	return faults, true
}

func (s *Stripe) adminClearFaults(w http.ResponseWriter, _ *http.Request) {
	s.ClearFaults()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Stripe) adminRefundStatus(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Status        string `json:"status"`
		FailureReason string `json:"failure_reason"`
	}
	if err := decodeJSON(r, &in); err != nil {
		adminError(w, http.StatusBadRequest, err)
		return
	}
	id := r.PathValue("id")
	if err := s.SetRefundStatus(id, in.Status, in.FailureReason); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, ErrNotFound) {
			status = http.StatusNotFound
		}
		adminError(w, status, err)
		return
	}
	s.mu.Lock()
	body := refundObject(s.refundBy[id])
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, body)
}

func (s *Stripe) adminEvents(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Events())
}

func (s *Stripe) adminResendEvent(w http.ResponseWriter, r *http.Request) {
	if err := s.ResendEvent(r.PathValue("id")); err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, ErrNotFound) {
			status = http.StatusNotFound
		}
		adminError(w, status, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
