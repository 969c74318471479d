package web

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
)

// OperationReader reads one operation and its attempts.
type OperationReader interface {
	Get(ctx context.Context, id string) (*ops.Operation, error)
	Attempts(ctx context.Context, opID string) ([]ops.Attempt, error)
}

type operationJSON struct {
	ID          string        `json:"id"`
	Kind        ops.Kind      `json:"kind"`
	Provider    string        `json:"provider"`
	Status      ops.Status    `json:"status"`
	Phase       ops.Phase     `json:"phase,omitempty"`
	OrderID     string        `json:"order_id,omitempty"`
	AmountCents int64         `json:"amount_cents,omitempty"`
	Currency    string        `json:"currency,omitempty"`
	Attempts    []attemptJSON `json:"attempts"`
	ProviderRef string        `json:"provider_ref,omitempty"`
	RetryUntil  *time.Time    `json:"retry_until,omitempty"`
	CreatedAt   time.Time     `json:"created_at"`
	ClosedAt    *time.Time    `json:"closed_at,omitempty"`
	ClosedBy    string        `json:"closed_by,omitempty"`
}

type attemptJSON struct {
	N                 int         `json:"n"`
	StartedAt         time.Time   `json:"started_at"`
	FinishedAt        *time.Time  `json:"finished_at,omitempty"`
	Outcome           ops.Outcome `json:"outcome,omitempty"`
	HTTPStatus        int         `json:"http_status,omitempty"`
	ProviderRequestID string      `json:"provider_request_id,omitempty"`
	ErrorCode         string      `json:"error_code,omitempty"`
	DurationMS        int64       `json:"duration_ms,omitempty"`
}

// handleGetOperation returns one of the tenant's operations with its attempts. The provider
// key is never shown to clients: it is Settle's to use, not theirs.
func (s *Server) handleGetOperation(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	op, err := s.Operations.Get(ctx, chi.URLParam(r, "id"))
	if err == nil && op.TenantID != tenantFrom(ctx).ID {
		// Another tenant's operation does not exist for this token.
		err = ops.Errorf(ops.ENOTFOUND, "No operation %s.", op.ID)
	}
	if err != nil {
		s.Error(w, r, err)
		return
	}
	atts, err := s.Operations.Attempts(ctx, op.ID)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	out := operationJSON{ID: op.ID, Kind: op.Kind, Provider: op.Provider, Status: op.Status, Phase: op.Phase,
		OrderID: op.OrderRef, AmountCents: op.AmountCents, Currency: op.Currency, ProviderRef: op.ProviderRef,
		RetryUntil: op.RetryUntil, CreatedAt: op.CreatedAt, ClosedAt: op.ClosedAt, ClosedBy: op.ClosedBy,
		Attempts: make([]attemptJSON, 0, len(atts))}
	for _, a := range atts {
		out.Attempts = append(out.Attempts, attemptJSON{N: a.N, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt,
			Outcome: a.Outcome, HTTPStatus: a.HTTPStatus, ProviderRequestID: a.ProviderRequestID, ErrorCode: a.ErrorCode,
			DurationMS: a.Duration.Milliseconds()})
	}
	s.writeJSON(w, r, http.StatusOK, out)
}
