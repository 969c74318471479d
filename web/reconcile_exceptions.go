package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/views"
)

// exceptionTabs are the queue's tabs, one per status, in the order an exception moves
// through them.
var exceptionTabs = []struct {
	status recon.ExceptionStatus
	label  string
}{
	{recon.ExceptionOpen, "Open"},
	{recon.ExceptionAcknowledged, "Acknowledged"},
	{recon.ExceptionResolved, "Resolved"},
}

var exceptionKindLabels = map[recon.ExceptionKind]string{
	recon.ExceptionDoubleCharge:     "Double charge",
	recon.ExceptionOrphanCharge:     "Orphan charge",
	recon.ExceptionMissingCharge:    "Missing charge",
	recon.ExceptionChargeOnFailed:   "Charged after failing",
	recon.ExceptionUsageMismatch:    "LLM usage mismatch",
	recon.ExceptionExplainedUnknown: "Unknown explained",
}

const exceptionPageSize = 50

func (s *Server) handleExceptions(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	f, form, err := parseExceptionsFilter(q)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	counts, err := s.Exceptions.CountExceptions(ctx, recon.ExceptionFilter{Kind: f.Kind, Severity: f.Severity})
	if err != nil {
		s.Error(w, r, err)
		return
	}
	list, names, ok := withTenantNames(s, w, r, func(ctx context.Context) ([]*recon.Exception, error) {
		return s.Exceptions.ListExceptions(ctx, f)
	})
	if !ok {
		return
	}
	saved, err := s.savedViewsBar(ctx, desk.PageExceptions, q, nil)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	m := views.ExceptionsPage{Viewer: viewer(userFrom(ctx)), Filter: form, Saved: saved}
	for _, t := range exceptionTabs {
		v := url.Values{"status": {string(t.status)}}
		if form.Kind != "" {
			v.Set("kind", form.Kind)
		}
		if form.Severity != "" {
			v.Set("severity", form.Severity)
		}
		m.Tabs = append(m.Tabs, views.ExceptionTab{Status: string(t.status), Label: t.label, Count: strconv.FormatInt(counts[t.status], 10),
			URL: "/reconcile/exceptions?" + v.Encode(), Active: t.status == f.Status})
	}
	m.Kinds = []views.Option{{Value: "", Label: "Any kind"}}
	for _, k := range recon.ExceptionKinds {
		m.Kinds = append(m.Kinds, views.Option{Value: string(k), Label: exceptionKindLabels[k], Selected: string(k) == form.Kind})
	}
	m.Severities = []views.Option{{Value: "", Label: "Any severity"}}
	for _, sv := range recon.Severities {
		m.Severities = append(m.Severities, views.Option{Value: string(sv), Label: string(sv), Selected: string(sv) == form.Severity})
	}
	for _, e := range list {
		m.Rows = append(m.Rows, exceptionRow(e, names))
	}
	if len(list) == exceptionPageSize {
		v := r.URL.Query()
		v.Set("before", strconv.FormatInt(list[len(list)-1].ID, 10))
		m.NextURL = "/reconcile/exceptions?" + v.Encode()
	}
	s.render(w, r, http.StatusOK, views.Exceptions(m))
}

// parseExceptionsFilter reads the exception queue's filter; bad values are refused.
func parseExceptionsFilter(q url.Values) (recon.ExceptionFilter, views.ExceptionsFilter, error) {
	form := views.ExceptionsFilter{Status: q.Get("status"), Kind: q.Get("kind"), Severity: q.Get("severity")}
	if form.Status == "" {
		form.Status = string(recon.ExceptionOpen)
	}
	f := recon.ExceptionFilter{Status: recon.ExceptionStatus(form.Status), Kind: recon.ExceptionKind(form.Kind),
		Severity: recon.Severity(form.Severity), Limit: exceptionPageSize}
	switch {
	case !f.Status.Valid():
		return f, form, ops.Errorf(ops.EINVALID, "There is no %q tab; choose open, acknowledged or resolved.", form.Status)
	case form.Kind != "" && !f.Kind.Valid():
		return f, form, ops.Errorf(ops.EINVALID, "There is no exception kind %q.", form.Kind)
	case form.Severity != "" && !f.Severity.Valid():
		return f, form, ops.Errorf(ops.EINVALID, "There is no severity %q.", form.Severity)
	}
	if b := q.Get("before"); b != "" {
		id, err := strconv.ParseInt(b, 10, 64)
		if err != nil || id <= 0 {
			return f, form, ops.Errorf(ops.EINVALID, "The page link is damaged; go back to the first page.")
		}
		f.BeforeID = id
	}
	return f, form, nil
}

func exceptionRow(e *recon.Exception, names map[int64]string) views.ExceptionRow {
	row := views.ExceptionRow{ID: strconv.FormatInt(e.ID, 10), URL: "/reconcile/exceptions/" + strconv.FormatInt(e.ID, 10),
		Kind: string(e.Kind), KindLabel: exceptionKindLabels[e.Kind], Severity: string(e.Severity), Status: string(e.Status),
		Provider: e.Provider, Tenant: tenantLabel(e.TenantID, names), Summary: e.Summary, Assignee: e.Assignee,
		FirstSeen: e.FirstSeenAt.UTC().Format("2006-01-02 15:04"), LastSeen: e.LastSeenAt.UTC().Format("2006-01-02 15:04"),
		SeenCount: e.SeenCount}
	if e.AmountCents != 0 {
		row.Amount = ops.FormatMoney(e.AmountCents, e.Currency)
	}
	return row
}

func (s *Server) exceptionID(r *http.Request) (int64, error) { return pathID(r, "exception") }

func (s *Server) handleException(w http.ResponseWriter, r *http.Request) {
	id, err := s.exceptionID(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	s.renderException(w, r, id, http.StatusOK, "")
}

// renderException shows one exception; status and msg carry the refusal of a form.
func (s *Server) renderException(w http.ResponseWriter, r *http.Request, id int64, status int, msg string) {
	ctx := r.Context()
	e, err := s.Exceptions.GetException(ctx, id)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	var op *ops.Operation
	if e.OperationID != "" {
		if op, err = s.Operations.Get(ctx, e.OperationID); err != nil {
			s.Error(w, r, err)
			return
		}
	}
	charges, err := s.Exceptions.ExceptionCharges(ctx, e)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	audit, names, ok := withTenantNames(s, w, r, func(ctx context.Context) ([]recon.AuditEntry, error) {
		return s.Exceptions.Audit(ctx, "recon_exception", strconv.FormatInt(e.ID, 10))
	})
	if !ok {
		return
	}
	m := views.ExceptionPage{Viewer: viewer(userFrom(ctx)), Exception: exceptionRow(e, names), Version: strconv.FormatInt(e.Version, 10),
		Note: e.Note, OperationID: e.OperationID, Error: msg,
		CanAcknowledge: e.Status == recon.ExceptionOpen, CanResolve: e.Status != recon.ExceptionResolved, CanReopen: e.Status == recon.ExceptionResolved}
	for _, sv := range recon.Severities {
		m.Severities = append(m.Severities, views.Option{Value: string(sv), Label: string(sv), Selected: sv == e.Severity})
	}
	if e.Kind == recon.ExceptionUsageMismatch {
		m.Theirs, m.Compare = usageCompare(e)
	} else {
		m.Theirs, m.Compare = compareRecords(e, op, charges)
	}
	for _, a := range audit {
		m.Audit = append(m.Audit, views.ReconAuditRow{At: a.At.UTC().Format("2006-01-02 15:04:05"), Actor: a.Actor, Action: a.Action,
			Reason: a.Reason, Change: auditChange(a)})
	}
	s.render(w, r, status, views.Exception(m))
}

// compareRecords puts our operation beside each of the provider's records, marking the
// fields where they disagree.
func compareRecords(e *recon.Exception, op *ops.Operation, charges []recon.ProviderCharge) ([]string, []views.ReconCompareRow) {
	var heads []string
	for _, c := range charges {
		heads = append(heads, e.Provider+" "+c.Ref)
	}
	if len(charges) == 0 {
		heads = []string{e.Provider + " (nothing found)"}
	}
	cols := func(f func(c recon.ProviderCharge) string) []string {
		if len(charges) == 0 {
			return []string{"—"}
		}
		out := make([]string, len(charges))
		for i, c := range charges {
			out[i] = f(c)
		}
		return out
	}
	anyOf := func(f func(c recon.ProviderCharge) bool) bool {
		for _, c := range charges {
			if f(c) {
				return true
			}
		}
		return false
	}
	chargedN := 0
	for _, c := range charges {
		if c.Charged() {
			chargedN++
		}
	}
	ours := func(f func(*ops.Operation) string) string {
		if op == nil {
			return "no operation"
		}
		return f(op)
	}
	want := 0
	if op != nil && op.Status == ops.StatusSucceeded {
		want = 1
	}
	rows := []views.ReconCompareRow{
		{Field: "Charges", Ours: fmt.Sprintf("%d expected", want), Theirs: []string{fmt.Sprintf("%d charged of %d records", chargedN, len(charges))},
			Differs: chargedN != want},
		{Field: "Operation", Ours: ours(func(o *ops.Operation) string { return o.ID }),
			Theirs:  cols(func(c recon.ProviderCharge) string { return orDash(c.OperationID) }),
			Differs: op == nil || anyOf(func(c recon.ProviderCharge) bool { return c.OperationID != op.ID })},
		{Field: "Record id", Ours: ours(func(o *ops.Operation) string { return orDash(o.ProviderRef) }),
			Theirs:  cols(func(c recon.ProviderCharge) string { return c.Ref }),
			Differs: op == nil || len(charges) == 0 || anyOf(func(c recon.ProviderCharge) bool { return c.Ref != op.ProviderRef })},
		{Field: "Amount", Ours: ours(func(o *ops.Operation) string { return ops.FormatMoney(o.AmountCents, o.Currency) }),
			Theirs: cols(func(c recon.ProviderCharge) string { return ops.FormatMoney(c.AmountCents, c.Currency) }),
			Differs: op != nil && anyOf(func(c recon.ProviderCharge) bool {
				return c.AmountCents != op.AmountCents || !strings.EqualFold(c.Currency, op.Currency)
			})},
		{Field: "Status", Ours: ours(func(o *ops.Operation) string { return string(o.Status) }),
			Theirs:  cols(func(c recon.ProviderCharge) string { return c.Status }),
			Differs: op != nil && anyOf(func(c recon.ProviderCharge) bool { return c.Charged() != (op.Status == ops.StatusSucceeded) })},
		{Field: "When (UTC)", Ours: ours(func(o *ops.Operation) string { return o.CreatedAt.UTC().Format("2006-01-02 15:04:05") }),
			Theirs: cols(func(c recon.ProviderCharge) string { return c.ChargedAt.UTC().Format("2006-01-02 15:04:05") })},
		{Field: "Closed by", Ours: ours(func(o *ops.Operation) string { return orDash(o.ClosedBy) }),
			Theirs: cols(func(recon.ProviderCharge) string { return "" })},
	}
	if op != nil {
		rows = append(rows, views.ReconCompareRow{Field: "Tenant · order", Ours: fmt.Sprintf("%d · %s", op.TenantID, orDash(op.OrderRef)),
			Theirs: cols(func(recon.ProviderCharge) string { return "" })})
	}
	return heads, rows
}

// usageCompare shows an LLM usage bucket: what we sent against what the provider billed. A
// report that counts prompt tokens instead of requests (Anthropic's) shows its tokens, and
// the requests it billed only where the tokens tell them.
func usageCompare(e *recon.Exception) ([]string, []views.ReconCompareRow) {
	var b struct {
		Billed         *int64 `json:"billed"`
		Answered       int64  `json:"answered"`
		Uncertain      int64  `json:"uncertain"`
		Sent           int64  `json:"sent"`
		BilledTokens   *int64 `json:"billed_prompt_tokens"`
		AnsweredTokens int64  `json:"answered_prompt_tokens"`
	}
	_ = json.Unmarshal(e.Details, &b)
	billed := "— (the report counts tokens, not requests)"
	if b.Billed != nil {
		billed = strconv.FormatInt(*b.Billed, 10)
	}
	var rows []views.ReconCompareRow
	if b.BilledTokens != nil {
		rows = append(rows, views.ReconCompareRow{Field: "Billed prompt tokens", Ours: fmt.Sprintf("%d in answered attempts", b.AnsweredTokens),
			Theirs: []string{strconv.FormatInt(*b.BilledTokens, 10)}, Differs: *b.BilledTokens != b.AnsweredTokens})
	}
	return []string{e.Provider + " usage report"}, append(rows,
		views.ReconCompareRow{Field: "Billed requests", Ours: fmt.Sprintf("%d answered", b.Answered), Theirs: []string{billed},
			Differs: b.Billed == nil || *b.Billed != b.Answered},
		views.ReconCompareRow{Field: "Uncertain attempts", Ours: strconv.FormatInt(b.Uncertain, 10), Theirs: []string{"—"}},
		views.ReconCompareRow{Field: "Attempts sent", Ours: strconv.FormatInt(b.Sent, 10), Theirs: []string{"—"}},
		views.ReconCompareRow{Field: "Bucket", Ours: e.Ref, Theirs: []string{e.Ref}},
	)
}

func auditChange(a recon.AuditEntry) string {
	var before, after map[string]any
	_ = json.Unmarshal(a.Before, &before)
	_ = json.Unmarshal(a.After, &after)
	var parts []string
	for _, k := range []string{"status", "severity", "assignee"} {
		b, aft := fmt.Sprint(before[k]), fmt.Sprint(after[k])
		if after[k] == nil {
			continue
		}
		if before == nil {
			parts = append(parts, fmt.Sprintf("%s %s", k, aft))
		} else if b != aft {
			parts = append(parts, fmt.Sprintf("%s %s → %s", k, b, aft))
		}
	}
	return strings.Join(parts, ", ")
}

// maxExceptionForm bounds the body of an exception's form. Its note takes
// recon.MaxNoteLength characters, and a character the form's field counts as one may take
// three bytes, each percent-encoded as three: 18 KB for the note alone.
const maxExceptionForm = 32 << 10

// handleExceptionChange applies one form of the workflow and, on success, sends the
// browser back to the exception (post/redirect/get). A refusal shows the page again with
// the reason.
func (s *Server) handleExceptionChange(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := s.exceptionID(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxExceptionForm)
	if !s.readForm(w, r) {
		return
	}
	version, err := strconv.ParseInt(r.PostForm.Get("version"), 10, 64)
	if err != nil {
		s.Error(w, r, ops.Errorf(ops.EINVALID, "The form is damaged; reload the page."))
		return
	}
	u := userFrom(ctx)
	c := recon.ExceptionChange{ID: id, Version: version, Action: recon.ExceptionAction(r.PostForm.Get("action")),
		Assignee: r.PostForm.Get("assignee"), Severity: recon.Severity(r.PostForm.Get("severity")), Note: r.PostForm.Get("note"),
		Actor: u.Email, At: s.Clock.Now()}
	if _, err := recon.ChangeException(ctx, s.Exceptions, c); err != nil {
		// A change refused as invalid or as a lost race is shown on the exception's page,
		// with the status of the one table (statusOf); anything else is the error page.
		if code := ops.ErrorCode(err); code == ops.EINVALID || code == ops.ECONFLICT {
			status, _ := statusOf(err)
			s.renderException(w, r, id, status, ops.ErrorMessage(err))
			return
		}
		s.Error(w, r, err)
		return
	}
	s.Logger.InfoContext(ctx, "exception changed", "exception_id", id, "action", c.Action, "user_id", u.ID)
	http.Redirect(w, r, "/reconcile/exceptions/"+strconv.FormatInt(id, 10), http.StatusSeeOther)
}
