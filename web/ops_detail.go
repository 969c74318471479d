package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// TimelineReader reads one operation with everything recorded about it.
type TimelineReader interface {
	Get(ctx context.Context, id string) (*ops.Operation, error)
	Timeline(ctx context.Context, opID string) (desk.Timeline, error)
	// MadeCharges is for the customer's sentence of a failed operation (ops rule 12).
	ops.MadeCharges
}

// handleOpDetail shows one operation. Support reads it too, without the provider key and
// without the actions.
func (s *Server) handleOpDetail(w http.ResponseWriter, r *http.Request) {
	if s.Timelines == nil {
		s.notConfigured(w, r)
		return
	}
	ctx := r.Context()
	op, err := s.Timelines.Get(ctx, chi.URLParam(r, "id"))
	if err != nil {
		s.Error(w, r, err)
		return
	}
	tl, err := s.Timelines.Timeline(ctx, op.ID)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	tenants, err := s.Accounts.Tenants(ctx)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	now := s.Clock.Now()
	v := viewer(userFrom(ctx))
	spec := s.kind(op.Kind)
	c, err := customerLine(ctx, spec, s.Timelines, op)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	m := views.OpDetailPage{Viewer: v, Op: opSummary(spec, op, tenantName(tenants, op.TenantID), now, v.CanAct()),
		Customer: s.followable(c, op, r.URL.RequestURI()), Timeline: timeline(tl), Evidence: evidenceItems(tl.Evidence),
		Actions: opActions(ctx, spec, op, tl.Attempts, now, s.Desk)}
	m.Op.Sent = sentNote(spec, op, tl.Attempts)
	if s.Desk != nil {
		pr, err := s.Desk.Proposal(ctx, op.ID)
		if err != nil {
			s.Error(w, r, err)
			return
		}
		m.Proposal = proposalView(pr, op, v, userFrom(ctx).ID, now)
		m.Actions.Awaiting = m.Proposal != nil && m.Proposal.Awaiting
	}
	if spec.Jobs {
		m.Jobs = s.opJobs(r, op, tenants)
	}
	if f := s.popFlash(ctx); f.Outcome != "" && f.OpID == op.ID {
		m.LastLookup = &views.LookupResult{ID: op.ID, Outcome: f.Outcome, Message: f.Message, NeedsPerson: f.Kind != "ok"}
	} else {
		m.Flash = f.view()
	}
	s.render(w, r, http.StatusOK, views.OpDetail(m))
}

func tenantName(ts []*ops.Tenant, id int64) string {
	for _, t := range ts {
		if t.ID == id {
			return t.Name
		}
	}
	return strconv.FormatInt(id, 10)
}

func opSummary(spec ops.KindSpec, op *ops.Operation, tenant string, now time.Time, showKey bool) views.OpSummary {
	sum := opFacts(op, tenant, showKey)
	sum.LLM = spec.Generation
	sum.KeyProtects = keyProtects(spec, op)
	rec := spec.RecordOf(op)
	sum.RecordLabel, sum.RecordHint, sum.RecordNeed = rec.Label, rec.Hint, "needed for succeeded"
	if rec.Fetch != "" {
		sum.RecordNeed += "; " + rec.Fetch
	}
	c := spec.CallOf(op)
	sum.API, sum.Model = c.API, c.Model
	if spec.Generation {
		sum.Cost = generationCost(op)
	}
	if op.RetryUntil != nil {
		sum.RetryUntil, sum.RetryUntilISO = formatTime(*op.RetryUntil), op.RetryUntil.UTC().Format(time.RFC3339)
		sum.NowISO = now.UTC().Format(time.RFC3339)
		if left := op.RetryUntil.Sub(now); left > 0 {
			sum.RetentionLeft = formatAge(left) + " left"
		} else {
			sum.RetentionPassed, sum.RetentionLeft = true, "passed "+formatAge(-left)+" ago"
		}
	}
	sum.Leased, sum.Stalled = op.Leased(now), op.Stalled(now)
	return sum
}

// keyProtects says what the operation's keys protect at its provider, no more (ops rule
// 12): Stripe keeps the provider key, so a resend within its retention replays; a provider
// that takes no key at all has its kind say what protects it instead (for an llm_call,
// Settle's replay of the client's key; for a job, its dedup key).
func keyProtects(spec ops.KindSpec, op *ops.Operation) string {
	if spec.KeyNote != "" {
		return fmt.Sprintf(spec.KeyNote, op.Provider)
	}
	if op.Retention <= 0 {
		return fmt.Sprintf("%s keeps no idempotency keys for this operation.", op.Provider)
	}
	return fmt.Sprintf("%s keeps idempotency keys for %s: a resend with this key within that time replays the first result instead of running again.", op.Provider, formatAge(op.Retention))
}

// sentNote says what was sent for op when no key deadline shows it: nothing yet (an attempt
// that never left Settle counts as none), or how many attempts left and what the provider answered to the last one. An attempt the provider may
// have run is said to be so (ops rule 12): a 500 or a lost answer does not show it never
// ran, and a generation may have been generated and billed.
func sentNote(spec ops.KindSpec, op *ops.Operation, all []ops.Attempt) string {
	var attempts []ops.Attempt
	for _, a := range all {
		if a.FinishedAt == nil || a.Outcome != ops.OutcomeNotSent {
			attempts = append(attempts, a)
		}
	}
	if len(attempts) == 0 {
		if op.Retention <= 0 && !spec.Generation {
			return "Nothing was sent yet, or this provider keeps no keys."
		}
		return "Nothing was sent yet."
	}
	last := attempts[0]
	for _, a := range attempts[1:] {
		if a.N > last.N {
			last = a
		}
	}
	sent := "1 attempt was sent"
	if len(attempts) > 1 {
		sent = fmt.Sprintf("%d attempts were sent", len(attempts))
	}
	var answer string
	switch {
	case last.FinishedAt == nil:
		answer = fmt.Sprintf("attempt %d has no answer yet", last.N)
	case last.HTTPStatus != 0:
		answer = fmt.Sprintf("the provider answered HTTP %d to attempt %d", last.HTTPStatus, last.N)
	default:
		answer = fmt.Sprintf("attempt %d ended %s", last.N, last.Outcome)
	}
	// The last answer does not stand for the operation while an earlier attempt may have
	// run: a 429 or a send that never left says nothing of what that one did.
	var earlier *ops.Attempt
	for i := range attempts {
		if a := &attempts[i]; a.N != last.N && a.Uncertain() && (earlier == nil || a.N > earlier.N) {
			earlier = a
		}
	}
	switch {
	case !last.Uncertain() && earlier != nil && spec.Generation:
		return fmt.Sprintf("%s; %s, but attempt %d ended %s: it may have been generated, and billed.", sent, answer, earlier.N, earlier.Outcome)
	case !last.Uncertain() && earlier != nil:
		return fmt.Sprintf("%s; %s, but attempt %d ended %s: the provider may have run it.", sent, answer, earlier.N, earlier.Outcome)
	case !last.Uncertain():
		return sent + "; " + answer + "."
	case spec.Generation:
		return sent + "; " + answer + ": it may have been generated, and billed."
	default:
		return sent + "; " + answer + ": the provider may have run it."
	}
}

// opFacts are the operation's own fields, formatted.
func opFacts(op *ops.Operation, tenant string, showKey bool) views.OpSummary {
	sum := views.OpSummary{
		ID: op.ID, URL: "/ops/" + url.PathEscape(op.ID), Tenant: tenant, Kind: string(op.Kind), Provider: op.Provider,
		Status: string(op.Status), Phase: string(op.Phase), Order: op.OrderRef, Customer: op.CustomerRef, Chat: op.ChatRef,
		Payment: op.PaymentRef, Attempts: strconv.Itoa(op.Attempts), Created: formatTime(op.CreatedAt),
		Updated: formatTime(op.UpdatedAt), ProviderRef: op.ProviderRef, ClosedBy: op.ClosedBy,
		Final: op.Status.Final(), Retention: "none",
	}
	if op.AmountCents != 0 || op.Currency != "" {
		sum.Amount = ops.FormatMoney(op.AmountCents, op.Currency)
	}
	if showKey {
		sum.ProviderKey = op.ProviderKey
	}
	if op.Retention > 0 {
		sum.Retention = formatAge(op.Retention)
	}
	if op.LeaseUntil != nil {
		sum.LeaseUntil = formatTime(*op.LeaseUntil)
	}
	if op.ClosedAt != nil {
		sum.Closed = formatTime(*op.ClosedAt)
	}
	return sum
}

// customerLine is the sentence support may send about op, read with the charges made of
// it that made holds, so a failed refund never says no money moved while one did.
func customerLine(ctx context.Context, spec ops.KindSpec, made ops.MadeCharges, op *ops.Operation) (views.CustomerLine, error) {
	c, err := spec.CustomerStatusOf(ctx, made, op)
	return views.CustomerLine{Headline: c.Headline, Sentence: c.Sentence, Known: c.Known}, err
}

// opActions decides what the page offers; every action checks the same again on the server.
func opActions(ctx context.Context, spec ops.KindSpec, op *ops.Operation, attempts []ops.Attempt, now time.Time, d Desk) views.OpActions {
	a := views.OpActions{Version: strconv.FormatInt(op.Version, 10)}
	switch {
	case op.Status.Final():
		a.Blocked = fmt.Sprintf("Closed as %s by %s; nothing more to do.", op.Status, op.ClosedBy)
		return a
	case d == nil:
		a.Blocked = "Lookups and closing are not configured on this server."
		return a
	case op.Leased(now):
		a.Blocked = fmt.Sprintf("A worker is sending it until %s: it cannot be looked up or closed until the lease ends.", formatTime(*op.LeaseUntil))
		return a
	}
	a.CanClose = true
	approvalNotes(ctx, d, op, &a)
	// A person's note is the weakest evidence: offer failed only where the rules accept it.
	if err := d.CheckManualFail(op, attempts, now); err != nil {
		a.FailedWhy = "Failed is not offered: " + ops.ErrorMessage(err)
	} else {
		a.CanCloseFailed = true
	}
	ok, why := d.CanLookUp(ctx, op)
	a.CanLookup = ok
	if !ok {
		a.LookupNote = "Lookups are unavailable for it: " + why + " It needs a person, who checks the provider's records and closes it by hand."
	}
	if spec.NotExecuted {
		if err := d.CheckNotExecuted(op, attempts, now); err != nil {
			a.NotExecutedWhy = "Close as not executed: " + ops.ErrorMessage(err)
		} else {
			a.CanCloseNotExecuted = true
		}
	}
	return a
}

// timeline merges what was recorded about an operation into one list in time order.
// Attempts are shown from their own table, so their audit rows are left out.
func timeline(tl desk.Timeline) []views.TimelineItem {
	var items timelineItems
	for _, c := range tl.Requests {
		items.add(c.ReceivedAt, requestItem(c))
	}
	for _, a := range tl.Attempts {
		items.add(a.StartedAt, attemptItem(a))
	}
	for _, e := range tl.Events {
		items.add(e.ReceivedAt, views.TimelineItem{Kind: "webhook", Title: "Webhook " + e.Type,
			Detail: joinNonEmpty(e.EventID, e.ObjectRef, "outcome "+e.Outcome), Actor: e.Provider})
	}
	for _, a := range tl.Audit {
		if it, ok := auditItem(a); ok {
			items.add(a.At, it)
		}
	}
	return items.sorted()
}

// timelineItem is one entry of the timeline with what orders it.
type timelineItem struct {
	at   time.Time
	rank int
	n    int
	v    views.TimelineItem
}

// timelineItems collects the entries of a timeline in the order they are added.
type timelineItems []timelineItem

// timelineRank orders things recorded in one transaction, which share a time: cause before
// effect. Entries are ranked by title, else by kind, else last.
var timelineRank = map[string]int{"Opened": 0, "request": 1, "attempt": 2, "webhook": 3, "lookup": 3,
	proposalTitles["close.propose"]: 3, "close": 4}

// add stamps v with its time and adds it.
func (items *timelineItems) add(at time.Time, v views.TimelineItem) {
	v.At, v.AtISO = formatTime(at), at.UTC().Format(time.RFC3339Nano)
	r, ok := timelineRank[v.Title]
	if !ok {
		if r, ok = timelineRank[v.Kind]; !ok {
			r = 5
		}
	}
	*items = append(*items, timelineItem{at, r, len(*items), v})
}

// sorted returns the entries by time, then rank, then the order they were added in.
func (items timelineItems) sorted() []views.TimelineItem {
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].at.Equal(items[j].at) {
			return items[i].at.Before(items[j].at)
		}
		if items[i].rank != items[j].rank {
			return items[i].rank < items[j].rank
		}
		return items[i].n < items[j].n
	})
	out := make([]views.TimelineItem, len(items))
	for i, it := range items {
		out[i] = it.v
	}
	return out
}

// cancelAnswers say what each answer of a client's cancel means, for people.
var cancelAnswers = map[ops.Answer]string{
	ops.AnswerCancelled:     "the provider cancelled it",
	ops.AnswerCancelTooLate: "too late: it had already finished",
	ops.AnswerCancelFailed:  "provider error: whether it was cancelled is not known",
	ops.AnswerCancelRefused: "refused",
}

// requestItem is a client request on the timeline. A cancel is one of its client's requests
// too, neither the intent again nor a duplicate of it, and says so.
func requestItem(c ops.ClientRequest) views.TimelineItem {
	title := "Client request"
	switch {
	case c.Answer.Cancel():
		title = "Cancel of the response (" + cancelAnswers[c.Answer] + ")"
	case c.Duplicate:
		title = "Duplicate client request"
	}
	d := ""
	if c.RequestRef != "" {
		d = "ref " + c.RequestRef
	}
	if c.RequestID != "" {
		d = joinNonEmpty(d, "request id "+c.RequestID)
	}
	if c.Answer != "" {
		d = joinNonEmpty(d, "answered "+string(c.Answer))
	}
	return views.TimelineItem{Kind: "request", Title: title, Detail: d}
}

// attemptItem is an attempt on the timeline.
func attemptItem(a ops.Attempt) views.TimelineItem {
	it := views.TimelineItem{Kind: "attempt", Title: "Attempt " + strconv.Itoa(a.N), Actor: a.Owner,
		Outcome: string(a.Outcome), ProviderRequestID: a.ProviderRequestID, ErrorCode: a.ErrorCode}
	if a.Outcome == "" {
		it.Outcome = "no result yet"
	}
	if a.HTTPStatus > 0 {
		it.HTTPStatus = strconv.Itoa(a.HTTPStatus)
	}
	if a.FinishedAt != nil {
		it.Duration = a.Duration.Round(time.Millisecond).String()
	}
	return it
}

// auditItem is an audit row on the timeline; false for the rows of attempts and releases,
// which the attempts show.
func auditItem(a desk.AuditLogEntry) (views.TimelineItem, bool) {
	kind, title := "change", a.Action
	switch {
	case len(a.Action) > 8 && a.Action[:8] == "attempt.", a.Action == "release":
		return views.TimelineItem{}, false
	case a.Action == "lookup":
		kind, title = "lookup", "Lookup at provider"
	case a.Action == "close":
		kind, title = "close", "Closed as "+auditStatus(a.After)
	case a.Action == "close.propose", a.Action == "close.rejected", a.Action == "close.superseded":
		title = proposalTitles[a.Action]
	case a.Action == "open":
		title = "Opened"
	case a.Action == "expire":
		title = "Expired"
	case a.Action == "reap":
		title = "Lease ran out; taken over"
	case a.Action == "mark_unknown":
		title = "Marked unknown"
	}
	return views.TimelineItem{Kind: kind, Title: title, Detail: a.Reason, Actor: a.Actor}, true
}

func auditStatus(b json.RawMessage) string {
	var v struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(b, &v)
	return v.Status
}

func evidenceItems(es []ops.Evidence) []views.EvidenceItem {
	out := make([]views.EvidenceItem, 0, len(es))
	for _, e := range es {
		it := views.EvidenceItem{Kind: string(e.Kind), ProviderRef: e.ProviderRef, Summary: e.Summary,
			RecordedBy: e.RecordedBy, RecordedAt: formatTime(e.RecordedAt)}
		if len(e.Data) > 0 {
			it.Data = string(e.Data)
			if len(it.Data) > 4000 {
				it.Data = truncate(it.Data, 4000) + " …"
			}
		}
		out = append(out, it)
	}
	return out
}

func joinNonEmpty(parts ...string) string {
	out := ""
	for _, p := range parts {
		if p == "" || p == "outcome " {
			continue
		}
		if out != "" {
			out += " · "
		}
		out += p
	}
	return out
}
