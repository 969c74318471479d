package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// defaultBulkCap bounds one bulk lookup: the provider allows a few reads per second, and a
// person waits for the answer.
const defaultBulkCap = 200

func (s *Server) bulkCap() int {
	if s.BulkCap > 0 {
		return s.BulkCap
	}
	return defaultBulkCap
}

// handleLookup looks one operation up at its provider, then shows the operation again with
// what the lookup found.
func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	if s.Desk == nil {
		s.notConfigured(w, r)
		return
	}
	ctx := r.Context()
	id := chi.URLParam(r, "id")
	out, err := s.Desk.Lookup(ctx, id, actor(r))
	if code := ops.ErrorCode(err); err != nil && (code == ops.ENOTFOUND || out.Op == nil) {
		s.Error(w, r, err)
		return
	} else if err != nil {
		s.Logger.ErrorContext(ctx, "lookup failed", "operation", id, "err", err)
	}
	kind := "warn"
	if !out.NeedsPerson() {
		kind = "ok"
	}
	s.putFlash(ctx, flashMsg{Kind: kind, Message: out.Message, Outcome: out.Outcome, OpID: out.Op.ID})
	http.Redirect(w, r, "/ops/"+url.PathEscape(out.Op.ID), http.StatusSeeOther)
}

// handleClose closes an operation by hand with a note. The version in the form is the one
// the person saw: a changed operation refuses the close instead of overwriting.
func (s *Server) handleClose(w http.ResponseWriter, r *http.Request) {
	id, version, ok := s.closeForm(w, r)
	if !ok {
		return
	}
	out, err := s.Desk.CloseManually(r.Context(), desk.ManualClose{ID: id, Version: version, To: ops.Status(r.PostForm.Get("to")),
		ProviderRef: r.PostForm.Get("provider_ref"), Note: r.PostForm.Get("note"), Actor: actor(r), ActorID: userFrom(r.Context()).ID})
	if err != nil {
		s.afterCloseError(w, r, id, err)
		return
	}
	if out.Proposal != nil {
		s.putFlash(r.Context(), proposedFlash(out.Proposal))
		http.Redirect(w, r, "/ops/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	op := out.Op
	f := flashMsg{Kind: "ok", Message: fmt.Sprintf("Closed as %s.", op.Status)}
	if op.Status == ops.StatusSucceeded && s.kind(op.Kind).Generation {
		if len(op.Result) > 0 {
			f.Message += " Settle fetched its answer from the provider, so the client's retry replays it."
		} else {
			f.Kind, f.Message = "warn", f.Message+" Settle could not fetch its answer from the provider (the evidence says why), so a retry with the client's key is told it is not stored and to ask again with a new key."
		}
	}
	s.putFlash(r.Context(), f)
	http.Redirect(w, r, "/ops/"+url.PathEscape(op.ID), http.StatusSeeOther)
}

// handleCloseNotExecuted closes a refund the provider never ran, after a fresh lookup.
func (s *Server) handleCloseNotExecuted(w http.ResponseWriter, r *http.Request) {
	id, version, ok := s.closeForm(w, r)
	if !ok {
		return
	}
	out, err := s.Desk.CloseNotExecutedBy(r.Context(), desk.NotExecutedClose{ID: id, Version: version, Note: r.PostForm.Get("note"),
		Actor: actor(r), ActorID: userFrom(r.Context()).ID})
	if err != nil {
		s.afterCloseError(w, r, id, err)
		return
	}
	kind := "warn"
	if !out.NeedsPerson() {
		kind = "ok"
	}
	s.putFlash(r.Context(), flashMsg{Kind: kind, Message: out.Message, Outcome: out.Outcome, OpID: id})
	http.Redirect(w, r, "/ops/"+url.PathEscape(id), http.StatusSeeOther)
}

// afterCloseError shows a refused close on the operation's page: a lost race names who
// closed it first; a note or status that is not acceptable says why. Anything else is an
// error page.
func (s *Server) afterCloseError(w http.ResponseWriter, r *http.Request, id string, err error) {
	var e *ops.Error
	switch {
	case errors.As(err, &e) && e.Closed != nil:
		msg := fmt.Sprintf("Already closed by %s (as %s at %s). Nothing was changed.",
			orSomeone(e.Closed.ClosedBy), e.Closed.Status, formatTime(e.Closed.ClosedAt))
		switch e.Reason {
		case "proposal_superseded":
			msg += " The proposal is superseded."
		case "proposal_approved":
			msg = e.Message
		}
		s.putFlash(r.Context(), flashMsg{Kind: "warn", Message: msg})
	case ops.Unreachable(err):
		// Settle's own database is out: the close may or may not have been recorded, so the
		// 503 page says so, never "nothing was changed".
		s.Error(w, r, err)
		return
	case ops.ErrorCode(err) == ops.EINVALID || ops.ErrorCode(err) == ops.ECONFLICT || ops.ErrorCode(err) == ops.EUNAVAILABLE,
		fourEyesRefusals[ops.ErrorReason(err)]:
		msg := ops.ErrorMessage(err)
		if !strings.Contains(strings.ToLower(msg), "nothing was changed") {
			msg += " Nothing was changed."
		}
		s.putFlash(r.Context(), flashMsg{Kind: "error", Message: msg})
	default:
		s.Error(w, r, err)
		return
	}
	http.Redirect(w, r, "/ops/"+url.PathEscape(id), http.StatusSeeOther)
}

func orSomeone(s string) string {
	if s == "" {
		return "someone else"
	}
	return s
}

// closeForm reads what every close posts: the operation's id from the path and the version
// the person saw. A close that cannot go on (no desk on this server, an unreadable form, no
// version) is answered here, and ok is false.
func (s *Server) closeForm(w http.ResponseWriter, r *http.Request) (id string, version int64, ok bool) {
	if !s.formFor(w, r, s.Desk != nil) {
		return "", 0, false
	}
	v, err := strconv.ParseInt(r.PostForm.Get("version"), 10, 64)
	if err != nil || v <= 0 {
		s.Error(w, r, ops.Errorf(ops.EINVALID, "The form lacks the version of the operation; reload the page and try again."))
		return "", 0, false
	}
	return operationID(chi.URLParam(r, "id")), v, true
}

// operationID is the id in an operation's address in its one spelling, so that a form posted
// to an address typed by hand (upper case, urn:uuid:) acts on, and lands on the page of, the
// operation itself. Text that is no id is left as it is, for the store to answer not found.
func operationID(spelt string) string {
	if u, err := uuid.Parse(spelt); err == nil {
		return u.String()
	}
	return spelt
}

// bulkLabels say in words why a lookup left operations for a person.
var bulkLabels = map[string]string{
	desk.LookupNotFound:     "not found at the provider: check them and close by hand, or as not executed once the key retention has passed",
	desk.LookupInFlight:     "being sent by a worker right now: look again once the lease has ended",
	desk.LookupUnsupported:  "no lookup exists for them (each one's page says why: its API, or its provider, keeps nothing Settle can read); close them by hand",
	desk.LookupUnavailable:  "the provider could not be asked: try again in a moment",
	desk.LookupFailed:       "failed with an internal error (see the logs)",
	desk.LookupNotItsRecord: "the provider holds a record naming them that is not theirs (another amount, currency or account): find out who made it, then close them by hand",
}

// handleBulkLookup looks up the ticked operations and reports how many closed, how many need
// a person, and why; everything matching the filter is looked up in the background instead.
func (s *Server) handleBulkLookup(w http.ResponseWriter, r *http.Request) {
	if !s.formFor(w, r, s.Desk != nil) {
		return
	}
	ctx := r.Context()
	_, f, form, err := s.queueFilter(ctx, r.PostForm)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	if r.PostForm.Get("scope") == "filter" {
		s.startBulkRun(w, r, f, form)
		return
	}
	if r.PostForm.Get("scope") != "selected" {
		s.Error(w, r, ops.Errorf(ops.EINVALID, "Choose the selected rows or everything matching the filter."))
		return
	}
	ids, err := selectedIDs(r.PostForm["ids"], s.bulkCap())
	if err != nil {
		s.Error(w, r, err)
		return
	}
	m := views.BulkPage{Viewer: viewer(userFrom(ctx)), BackURL: queueURL(r.PostForm, url.Values{})}
	if len(ids) > 0 {
		out := s.Desk.LookupMany(ctx, ids, actor(r))
		m.Closed, m.AlreadyClosed, m.NeedPerson = out.Closed, out.AlreadyClosed, out.NeedPerson
		for outcome, n := range out.Reasons {
			m.Reasons = append(m.Reasons, views.BulkReason{Outcome: outcome, Label: bulkLabels[outcome], Count: n})
		}
		sort.Slice(m.Reasons, func(i, j int) bool { return m.Reasons[i].Count > m.Reasons[j].Count })
		for _, res := range out.Results {
			row := views.LookupResult{ID: res.OperationID, URL: "/ops/" + url.PathEscape(res.OperationID), Outcome: res.Outcome,
				Message: res.Message, NeedsPerson: res.NeedsPerson()}
			if res.Op != nil {
				row.Order = res.Op.OrderRef
			}
			m.Results = append(m.Results, row)
		}
	}
	s.render(w, r, http.StatusOK, views.Bulk(m))
}

// selectedIDs checks the ticked ids: a forged value is refused, not looked up. Each is
// taken in its one spelling, so an operation named twice (upper case, urn:uuid:) is looked
// up and counted once, not once per spelling.
func selectedIDs(raw []string, limit int) ([]string, error) {
	seen := map[string]bool{}
	var ids []string
	for _, spelt := range raw {
		u, err := uuid.Parse(spelt)
		if err != nil {
			return nil, ops.Errorf(ops.EINVALID, "The selection holds something that is not an operation id.")
		}
		if id := u.String(); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) > limit {
		return nil, ops.Errorf(ops.EINVALID, "Select at most %d operations at once.", limit)
	}
	return ids, nil
}
