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

func (s *Stripe) adminAddPaymentIntent(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ID       string            `json:"id"`
		Amount   int64             `json:"amount"`
		Currency string            `json:"currency"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := decodeJSON(r, &in); err != nil {
		adminError(w, http.StatusBadRequest, err)
		return
	}
	pi, created, err := s.addPaymentIntent(in.ID, in.Amount, in.Currency, in.Metadata)
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
	faults := s.Faults()
	if faults == nil {
		faults = []Fault{}
	}
	writeJSON(w, http.StatusOK, faults)
}

// adminAddFaults appends rules given as a JSON array of Fault, or, with Content-Type
// text/plain, as a ParseFaults spec.
func (s *Stripe) adminAddFaults(w http.ResponseWriter, r *http.Request) {
	var faults []Fault
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "text/plain" {
		b, err := io.ReadAll(io.LimitReader(r.Body, adminBodyLimit))
		if err != nil {
			adminError(w, http.StatusBadRequest, fmt.Errorf("reading body: %w", err))
			return
		}
		if faults, err = ParseFaults(string(b)); err != nil {
			adminError(w, http.StatusBadRequest, err)
			return
		}
	} else if err := decodeJSON(r, &faults); err != nil {
		adminError(w, http.StatusBadRequest, err)
		return
	}
	for i, f := range faults {
		if err := f.Validate(); err != nil {
			adminError(w, http.StatusBadRequest, fmt.Errorf("fault %d: %w", i+1, err))
			return
		}
	}
	for _, f := range faults {
		s.AddFault(f)
	}
	s.adminListFaults(w, r)
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
