package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/views"
)

// SupportSearcher finds operations by the references a customer gives support.
type SupportSearcher interface {
	SearchSupport(ctx context.Context, q string, limit int) ([]*ops.Operation, error)
	// MadeCharges is for the customer's sentence of a failed operation (ops rule 12).
	ops.MadeCharges
}

// supportMaxQuery is longer than any reference; a longer search is a paste mistake.
const supportMaxQuery = 200

// handleSupport answers "what can I tell the customer?". Whatever is typed, the answer is a
// page: an odd search gets a notice in words, never an error.
func (s *Server) handleSupport(w http.ResponseWriter, r *http.Request) {
	if s.SupportSearch == nil {
		s.notConfigured(w, r)
		return
	}
	ctx := r.Context()
	v := viewer(userFrom(ctx))
	raw := r.URL.Query().Get("q")
	q, notice := cleanSearch(raw)
	m := views.SupportPage{Viewer: v, Flash: s.popFlash(ctx).view(), Query: q, Searched: strings.TrimSpace(raw) != "", Notice: notice}
	if q != "" && notice == "" {
		list, err := s.SupportSearch.SearchSupport(ctx, q, 20)
		if err != nil {
			s.Error(w, r, err)
			return
		}
		for _, op := range list {
			spec := s.kind(op.Kind)
			res := supportResult(spec, op, v.CanAct())
			c, err := customerLine(ctx, spec, s.SupportSearch, op)
			if err != nil {
				s.Error(w, r, err)
				return
			}
			res.Customer = s.followable(c, op, r.URL.RequestURI())
			m.Results = append(m.Results, res)
		}
	}
	s.render(w, r, http.StatusOK, views.Support(m))
}

// cleanSearch keeps what a reference can hold and says so in words when it cannot.
func cleanSearch(raw string) (string, string) {
	q := strings.TrimSpace(raw)
	if !utf8.ValidString(q) {
		q = strings.ToValidUTF8(q, "")
	}
	q = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, q)
	if len(q) > supportMaxQuery {
		return truncate(q, supportMaxQuery), "That search is too long to be an order, customer, chat or operation id. Paste just one of them."
	}
	return q, ""
}

// truncate cuts s to at most n bytes without splitting a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func supportResult(spec ops.KindSpec, op *ops.Operation, canAct bool) views.SupportResult {
	res := views.SupportResult{ID: op.ID, Order: op.OrderRef, Requested: formatTime(op.CreatedAt), What: spec.Name}
	if op.AmountCents != 0 {
		res.Amount = ops.FormatMoney(op.AmountCents, op.Currency)
	}
	if canAct {
		res.DetailURL = "/ops/" + url.PathEscape(op.ID)
	}
	return res
}
