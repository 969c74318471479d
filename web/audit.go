package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// AuditReader reads the audit log.
type AuditReader interface {
	AuditLog(ctx context.Context, f desk.AuditFilter) (desk.AuditPage, error)
}

// auditActions are the actions people filter by; the log holds a few more machine ones.
var auditActions = []string{"open", "close", "lookup", "expire", "mark_unknown", "reap",
	"attempt.ok", "attempt.timeout", "attempt.server_error", "attempt.invalid",
	"user.add", "user.role", "user.disable", "user.enable", "token.add", "token.revoke",
	"close.propose", "close.rejected", "close.superseded", "tenant.approvals"}

const auditPageSize = 50

// handleAudit lists who did what, newest first, filtered by person, operation, action and
// date, with a keyset cursor for older pages.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	if s.AuditLog == nil {
		s.notConfigured(w, r)
		return
	}
	ctx := r.Context()
	q := r.URL.Query()
	f, form, err := parseAuditFilter(q)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	page, err := s.AuditLog.AuditLog(ctx, f)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	m := views.AuditPage{Viewer: viewer(userFrom(ctx)), Filter: form}
	m.Actions = []views.Option{{Value: "", Label: "Any action"}}
	for _, a := range auditActions {
		m.Actions = append(m.Actions, views.Option{Value: a, Label: a, Selected: a == form.Action})
	}
	if s.UserAdmin != nil {
		if users, err := s.UserAdmin.Users(ctx); err == nil {
			for _, u := range users {
				m.People = append(m.People, u.Email)
			}
		}
	}
	for _, e := range page.Entries {
		row := views.AuditLogRow{At: formatTime(e.At), Actor: e.Actor, Action: e.Action, Entity: e.Entity, EntityID: e.EntityID,
			Before: compactJSON(e.Before), After: compactJSON(e.After), Reason: e.Reason}
		if e.Entity == "operation" {
			row.EntityURL = "/ops/" + url.PathEscape(e.EntityID)
		}
		m.Entries = append(m.Entries, row)
	}
	if page.Next != nil {
		v := url.Values{}
		for k, vs := range q {
			if k != "after_at" && k != "after_id" && len(vs) > 0 && vs[0] != "" {
				v.Set(k, vs[0])
			}
		}
		v.Set("after_at", page.Next.At.UTC().Format(time.RFC3339Nano))
		v.Set("after_id", strconv.FormatInt(page.Next.ID, 10))
		m.NextURL = "/audit?" + v.Encode()
	}
	s.render(w, r, http.StatusOK, views.Audit(m))
}

// parseAuditFilter reads the filter from the query string; dates are whole days in UTC,
// the "to" day included.
func parseAuditFilter(q url.Values) (desk.AuditFilter, views.AuditFilter, error) {
	form := views.AuditFilter{Actor: strings.TrimSpace(q.Get("actor")), Action: q.Get("action"),
		Operation: strings.TrimSpace(q.Get("op")), From: q.Get("from"), To: q.Get("to")}
	f := desk.AuditFilter{Actor: form.Actor, Action: form.Action, EntityID: form.Operation, Limit: auditPageSize}
	if len(form.Actor) > 200 || !printable(form.Actor) {
		return f, form, ops.Errorf(ops.EINVALID, "That is not a person's name or email.")
	}
	if form.Action != "" {
		known := false
		for _, a := range auditActions {
			known = known || a == form.Action
		}
		if !known {
			return f, form, ops.Errorf(ops.EINVALID, "There is no action %q in the audit log.", form.Action)
		}
	}
	if form.Operation != "" && uuid.Validate(form.Operation) != nil {
		return f, form, ops.Errorf(ops.EINVALID, "%q is not an operation id.", truncate(form.Operation, 64))
	}
	var err error
	if form.From != "" {
		if f.From, err = time.Parse(time.DateOnly, form.From); err != nil {
			return f, form, ops.Errorf(ops.EINVALID, "The start date must look like 2026-03-02.")
		}
	}
	if form.To != "" {
		to, err := time.Parse(time.DateOnly, form.To)
		if err != nil {
			return f, form, ops.Errorf(ops.EINVALID, "The end date must look like 2026-03-02.")
		}
		f.To = to.AddDate(0, 0, 1)
	}
	if at, id := q.Get("after_at"), q.Get("after_id"); at != "" || id != "" {
		t, err1 := time.Parse(time.RFC3339Nano, at)
		n, err2 := strconv.ParseInt(id, 10, 64)
		if err1 != nil || err2 != nil {
			return f, form, ops.Errorf(ops.EINVALID, "The page link is damaged; go back to the first page.")
		}
		f.After = &desk.AuditCursor{At: t, ID: n}
	}
	return f, form, nil
}

func compactJSON(b json.RawMessage) string {
	if len(b) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}
