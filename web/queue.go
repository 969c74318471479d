package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/views"
)

// queueTabs are the queues people work, in the order the page shows them.
var queueTabs = []struct {
	status ops.Status
	label  string
}{
	{ops.StatusUnknown, "Unknown"},
	{ops.StatusInProgress, "In progress"},
	{ops.StatusExpired, "Expired"},
}

// queueAges are the "older than" choices; free durations would only make bookmarks odd.
var queueAges = []struct{ value, label string }{
	{"", "Any age"},
	{"5m", "5 minutes"},
	{"1h", "1 hour"},
	{"24h", "1 day"},
	{"168h", "7 days"},
}

// queueRefreshes are the auto-refresh choices, in seconds; 0 pauses.
var queueRefreshes = []struct{ value, label string }{
	{"0", "Off"},
	{"5", "5 s"},
	{"10", "10 s"},
	{"30", "30 s"},
	{"60", "1 min"},
}

// defaultRefresh keeps the counts live without reloading under someone's hands too often.
const defaultRefresh = 30

const queuePageSize = 50

// handleQueue shows one queue tab. It reads only the URL, so every view is a link that can
// be shared in an incident channel.
func (s *Server) handleQueue(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	tenants, f, form, err := s.queueFilter(ctx, q)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	now := f.Now
	counts, err := s.Queues.QueueCounts(ctx, f)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	page, err := s.Queues.ListQueue(ctx, f, now)
	if err != nil {
		s.Error(w, r, err)
		return
	}

	running, err := s.runningBulks(ctx)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	saved, err := s.savedViewsBar(ctx, desk.PageQueue, q, func(vq url.Values) (string, error) {
		return s.queueViewCount(ctx, vq, tenants)
	})
	if err != nil {
		s.Error(w, r, err)
		return
	}
	refresh, err := parseRefresh(q.Get("refresh"))
	if err != nil {
		s.Error(w, r, err)
		return
	}
	v := viewer(userFrom(ctx))
	m := views.QueuePage{Viewer: v, Filter: form, Flash: s.popFlash(ctx).view(), CanAct: v.CanAct(), BulkCap: s.bulkCap(),
		Running: running, Saved: saved,
		Refresh: views.Refresh{Seconds: refresh, LiveURL: r.URL.RequestURI(),
			PauseURL: queueURL(q, url.Values{"refresh": {"0"}}), ResumeURL: queueURL(q, url.Values{"refresh": {strconv.Itoa(defaultRefresh)}})}}
	for _, o := range queueRefreshes {
		m.Refresh.Options = append(m.Refresh.Options, views.Option{Value: o.value, Label: o.label, Selected: o.value == strconv.Itoa(refresh)})
	}
	names := queueOptions(&m, tenants, s.kinds(), form)
	m.Tabs = queueTabsOf(q, f, counts)
	awaiting, err := s.awaiting(ctx, page.Ops)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	for _, o := range page.Ops {
		row := queueRow(s.kind(o.Kind), o, names[o.TenantID], now)
		row.Awaiting = awaitingLine(awaiting[o.ID], now)
		m.Rows = append(m.Rows, row)
	}
	if page.Next != nil {
		m.NextURL = queueURL(q, url.Values{
			"after_created": {page.Next.CreatedAt.UTC().Format(time.RFC3339Nano)},
			"after_id":      {page.Next.ID},
		})
	}
	s.render(w, r, http.StatusOK, views.Queue(m))
}

// queueOptions fills the filter's select boxes and returns the tenants' names by id.
func queueOptions(m *views.QueuePage, tenants []*ops.Tenant, kinds []ops.KindSpec, form views.QueueFilter) map[int64]string {
	names := make(map[int64]string, len(tenants))
	m.Tenants = []views.Option{{Value: "", Label: "All tenants"}}
	for _, t := range tenants {
		names[t.ID] = t.Name
		m.Tenants = append(m.Tenants, views.Option{Value: t.Name, Label: t.Name, Selected: t.Name == form.Tenant})
	}
	m.Kinds = []views.Option{{Value: "", Label: "Any kind"}}
	for _, k := range kinds {
		m.Kinds = append(m.Kinds, views.Option{Value: string(k.Kind), Label: string(k.Kind), Selected: string(k.Kind) == form.Kind})
	}
	for _, a := range queueAges {
		m.Ages = append(m.Ages, views.Option{Value: a.value, Label: a.label, Selected: a.value == form.Age})
	}
	return names
}

// queueTabsOf is the tabs with their counts; a count that may stop at the cap says so.
func queueTabsOf(q url.Values, f desk.QueueFilter, counts map[ops.Status]int64) []views.QueueTab {
	var tabs []views.QueueTab
	for _, t := range queueTabs {
		n := counts[t.status]
		label := strconv.FormatInt(n, 10)
		if desk.CountIsCapped(t.status, f) && n > desk.QueueCountCap {
			label = strconv.Itoa(desk.QueueCountCap) + "+"
		}
		tabs = append(tabs, views.QueueTab{
			Status: string(t.status), Label: t.label, Count: label,
			URL: queueURL(q, url.Values{"tab": {string(t.status)}}), Active: t.status == f.Status,
		})
	}
	return tabs
}

// queueViewCount is how many operations a saved view of the queue matches now, capped as
// the tabs' counts are; a view whose filter no longer parses (its tenant was renamed) says so.
func (s *Server) queueViewCount(ctx context.Context, q url.Values, tenants []*ops.Tenant) (string, error) {
	f, _, err := parseQueueFilter(q, tenants, s.Clock.Now())
	if err != nil {
		return "?", nil
	}
	counts, err := s.Queues.QueueCounts(ctx, f)
	if err != nil {
		return "", err
	}
	n := counts[f.Status]
	if desk.CountIsCapped(f.Status, f) && n > desk.QueueCountCap {
		return strconv.Itoa(desk.QueueCountCap) + "+", nil
	}
	return strconv.FormatInt(n, 10), nil
}

// queueFilter reads the tenants and, with their names, the queue's filter from q as of now.
func (s *Server) queueFilter(ctx context.Context, q url.Values) ([]*ops.Tenant, desk.QueueFilter, views.QueueFilter, error) {
	tenants, err := s.Accounts.Tenants(ctx)
	if err != nil {
		return nil, desk.QueueFilter{}, views.QueueFilter{}, err
	}
	f, form, err := parseQueueFilter(q, tenants, s.Clock.Now())
	return tenants, f, form, err
}

// parseQueueFilter turns the query string into a store filter and the form's echo. Bad
// values are refused rather than ignored, so a mistyped link does not silently show a
// different queue.
func parseQueueFilter(q url.Values, tenants []*ops.Tenant, now time.Time) (desk.QueueFilter, views.QueueFilter, error) {
	form := views.QueueFilter{
		Tab:      q.Get("tab"),
		Tenant:   q.Get("tenant"),
		Kind:     q.Get("kind"),
		Provider: strings.TrimSpace(q.Get("provider")),
		Age:      q.Get("age"),
		Search:   strings.TrimSpace(q.Get("q")),
		Awaiting: q.Get("awaiting") == "1",
	}
	if form.Tab == "" {
		form.Tab = string(ops.StatusUnknown)
	}
	f := desk.QueueFilter{Kind: ops.Kind(form.Kind), Provider: form.Provider, Search: form.Search, Now: now, Limit: queuePageSize,
		Awaiting: form.Awaiting}
	for _, t := range queueTabs {
		if string(t.status) == form.Tab {
			f.Status = t.status
		}
	}
	if f.Status == "" {
		return f, form, ops.Errorf(ops.EINVALID, "There is no %q queue; choose Unknown, In progress or Expired.", form.Tab)
	}
	if form.Tenant != "" {
		for _, t := range tenants {
			if t.Name == form.Tenant {
				f.TenantID = t.ID
			}
		}
		if f.TenantID == 0 {
			return f, form, ops.Errorf(ops.EINVALID, "There is no tenant %q.", form.Tenant)
		}
	}
	if form.Kind != "" && !f.Kind.Valid() {
		return f, form, ops.Errorf(ops.EINVALID, "There is no operation kind %q.", form.Kind)
	}
	if form.Age != "" {
		d, err := time.ParseDuration(form.Age)
		if err != nil || d < 0 {
			return f, form, ops.Errorf(ops.EINVALID, "%q is not an age; use a duration such as 1h.", form.Age)
		}
		f.OlderThan = d
	}
	if len(form.Search) > 200 || len(form.Provider) > 64 {
		return f, form, ops.Errorf(ops.EINVALID, "The search is too long; paste one reference or id.")
	}
	if !printable(form.Search) || !printable(form.Provider) {
		return f, form, ops.Errorf(ops.EINVALID, "The search holds characters no reference has; paste one reference or id.")
	}
	afterAt, afterID := q.Get("after_created"), q.Get("after_id")
	if afterAt != "" || afterID != "" {
		at, err := time.Parse(time.RFC3339Nano, afterAt)
		if err != nil || uuid.Validate(afterID) != nil {
			return f, form, ops.Errorf(ops.EINVALID, "The page link is damaged; go back to the first page.")
		}
		f.After = &desk.QueueCursor{CreatedAt: at, ID: afterID}
	}
	return f, form, nil
}

// parseRefresh reads the auto-refresh interval; only the offered choices are accepted.
func parseRefresh(v string) (int, error) {
	if v == "" {
		return defaultRefresh, nil
	}
	for _, o := range queueRefreshes {
		if o.value == v {
			return strconv.Atoi(v)
		}
	}
	return 0, ops.Errorf(ops.EINVALID, "%q is not a refresh interval; choose one from the list.", v)
}

// queueURL is the current query with some values replaced; a new tab or filter always
// starts again from the first page.
func queueURL(q url.Values, set url.Values) string {
	v := url.Values{}
	for k, vs := range q {
		if k == "after_created" || k == "after_id" || len(vs) == 0 || vs[0] == "" {
			continue
		}
		v.Set(k, vs[0])
	}
	for k, vs := range set {
		v[k] = vs
	}
	return "/ops?" + v.Encode()
}

func queueRow(spec ops.KindSpec, o *ops.Operation, tenant string, now time.Time) views.QueueRow {
	if tenant == "" {
		tenant = strconv.FormatInt(o.TenantID, 10)
	}
	row := views.QueueRow{
		ID: o.ID, URL: "/ops/" + url.PathEscape(o.ID), Tenant: tenant, Kind: string(o.Kind),
		Provider: o.Provider, Order: o.OrderRef, Status: string(o.Status), Phase: string(o.Phase),
		Attempts: o.Attempts, Age: formatAge(now.Sub(o.CreatedAt)), Stalled: o.Stalled(now),
	}
	if o.AmountCents != 0 || o.Currency != "" {
		row.Amount = ops.FormatMoney(o.AmountCents, o.Currency)
	}
	c := spec.CallOf(o)
	row.API, row.Model = c.API, c.Model
	if spec.Generation {
		row.Amount = generationCost(o)
	}
	return row
}

// generationCost is the cost an LLM operation recorded, in its price table's currency. An
// open one that recorded none says so rather than show a zero the provider may not have
// billed (ops rule 12).
func generationCost(o *ops.Operation) string {
	if o.CostMicros == 0 && !o.Status.Final() {
		return "none recorded"
	}
	return ops.FormatMicros(o.CostMicros, llm.CostCurrency(o))
}

// formatAge keeps two units at most: on-call people compare ages, they do not add them.
func formatAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "<1m"
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd %dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
}

// printable reports whether s is valid UTF-8 without control characters; Postgres refuses
// a NUL in text, and no reference holds one.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
