package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/views"
)

// ReconReader is what the reconciliation pages read of the table's numbers: the per-window
// table reads the rollups (RollupMetrics); the drill-down reads the raw rows behind one
// cell, a page at a time.
type ReconReader interface {
	recon.MetricsStore
}

// ExceptionReader is what the reconciliation pages read from the reconciler's own store:
// the exception queue, and when each reconciler last ran and who runs it now.
type ExceptionReader interface {
	recon.ExceptionStore
	Leases(ctx context.Context) ([]recon.Lease, error)
}

// ReconcileDeps are the dependencies of the reconciliation pages; an exception's page shows
// its operation from the server's Operations. With Recon nil the pages are not mounted;
// Recon without Exceptions or Operations is a wiring mistake and panics.
type ReconcileDeps struct {
	Recon      ReconReader
	Exceptions ExceptionReader
}

// mountReconcile adds the reconciliation pages; it runs inside the session group. The
// per-window table is for managers; the exception queue for on-call engineers and above.
func (s *Server) mountReconcile(r chi.Router) {
	if s.Recon == nil {
		return
	}
	if s.Exceptions == nil || s.Operations == nil {
		// A half-wired server would serve the table and fail on the exception queue or an
		// exception's page; it is refused as it starts instead.
		panic("web: ReconcileDeps.Recon is set without Exceptions or Operations")
	}
	managers := s.forRole(r, desk.RoleManager)
	managers.Get("/reconcile", s.handleReconcile)
	managers.Get("/reconcile.csv", s.handleReconcileCSV)
	managers.Get("/reconcile/drill", s.handleReconcileDrill)

	oncall := s.forRole(r, desk.RoleOncall)
	oncall.Get("/reconcile/exceptions", s.handleExceptions)
	oncall.Get("/reconcile/exceptions/{id}", s.handleException)
	oncall.Post("/reconcile/exceptions/{id}", s.handleExceptionChange)
}

// reconRanges are the report's ranges; free ranges would only make bookmarks odd.
var reconRanges = []struct {
	value, label string
	d            time.Duration
	bucket       string
}{
	{"24h", "Last 24 hours", 24 * time.Hour, "hour"},
	{"7d", "Last 7 days", 7 * 24 * time.Hour, "day"},
	{"30d", "Last 30 days", 30 * 24 * time.Hour, "day"},
}

// reconColumns are the table's measures, in order, with their headers.
var reconColumns = []struct {
	m      recon.Measure
	header string
	value  func(recon.MetricsRow) int64
	alert  bool
}{
	{recon.MeasureClientRequests, "Client requests", func(r recon.MetricsRow) int64 { return r.ClientRequests }, false},
	// The duplicate rate's denominator, as /insights and the alert rules count it.
	{recon.MeasureAdmitted, "Admitted requests", recon.MetricsRow.Admitted, false},
	{recon.MeasureDuplicates, "Duplicates", func(r recon.MetricsRow) int64 { return r.Duplicates }, false},
	{recon.MeasureReplays, "Replays", func(r recon.MetricsRow) int64 { return r.Replays }, false},
	{recon.MeasureOperations, "Operations", func(r recon.MetricsRow) int64 { return r.Operations }, false},
	{recon.MeasureSucceeded, "Succeeded", func(r recon.MetricsRow) int64 { return r.Succeeded }, false},
	{recon.MeasureAttempts, "Attempts sent", func(r recon.MetricsRow) int64 { return r.AttemptsSent }, false},
	{recon.MeasureTimeouts, "Timeouts", func(r recon.MetricsRow) int64 { return r.Timeouts }, false},
	{recon.MeasureCharges, "Provider charges", func(r recon.MetricsRow) int64 { return r.Charges }, false},
	{recon.MeasureOrphans, "Orphan charges", func(r recon.MetricsRow) int64 { return r.Orphans }, true},
	{recon.MeasureDoubleCharges, "Double charges", func(r recon.MetricsRow) int64 { return r.DoubleCharges }, true},
}

type reconQuery struct {
	filter  recon.MetricsFilter
	form    views.ReconcileFilter
	names   map[int64]string
	tenants []*ops.Tenant
	// apis are the APIs the table may be narrowed to.
	apis []apiChoice
}

// parseReconQuery reads the report's filter from the URL. Bad values are refused, not
// ignored, so a mistyped link does not silently show another report.
func (s *Server) parseReconQuery(ctx context.Context, q url.Values) (reconQuery, error) {
	out := reconQuery{names: map[int64]string{}}
	tenants, err := s.Accounts.Tenants(ctx)
	if err != nil {
		return out, err
	}
	out.tenants = tenants
	for _, t := range tenants {
		out.names[t.ID] = t.Name
	}
	form := views.ReconcileFilter{Range: q.Get("range"), Bucket: q.Get("bucket"), Tenant: q.Get("tenant"), Kind: q.Get("kind"),
		Provider: strings.TrimSpace(q.Get("provider")), API: strings.TrimSpace(q.Get("api"))}
	if form.Range == "" {
		form.Range = "24h"
	}
	var span time.Duration
	for _, r := range reconRanges {
		if r.value == form.Range {
			span = r.d
			if form.Bucket == "" {
				form.Bucket = r.bucket
			}
		}
	}
	if span == 0 {
		return out, ops.Errorf(ops.EINVALID, "There is no range %q; choose 24h, 7d or 30d.", form.Range)
	}
	var width time.Duration
	switch form.Bucket {
	case "hour":
		width = time.Hour
	case "day":
		width = 24 * time.Hour
	default:
		return out, ops.Errorf(ops.EINVALID, "Rows are per hour or per day, not %q.", form.Bucket)
	}
	if width == time.Hour && span > 7*24*time.Hour {
		return out, ops.Errorf(ops.EINVALID, "Hourly rows go back 7 days at most; choose daily rows for 30 days.")
	}
	// Whole windows, the current one included: the last row fills up as time goes on.
	now := s.Clock.Now().UTC()
	f := recon.MetricsFilter{Bucket: width, Kind: ops.Kind(form.Kind), Provider: form.Provider, API: form.API,
		Window: recon.Window{From: rangeFrom(form.Range, now, width), To: now.Truncate(width).Add(width)}}
	if f.TenantID, err = checkGroupFilter(tenants, form.Tenant, f.Kind, f.Provider); err != nil {
		return out, err
	}
	out.apis = apiChoices(s.kinds())
	if err := checkAPI(out.apis, f.API); err != nil {
		return out, err
	}
	out.filter, out.form = f, form
	return out, nil
}

// checkGroupFilter checks the group a report of the rollups is narrowed to, as its form
// names it ("" for all): it returns the id of the tenant named, and refuses a tenant or
// kind that does not exist and a provider name too long to be one.
func checkGroupFilter(tenants []*ops.Tenant, tenant string, kind ops.Kind, provider string) (int64, error) {
	var id int64
	if tenant != "" {
		for _, t := range tenants {
			if t.Name == tenant {
				id = t.ID
			}
		}
		if id == 0 {
			return 0, ops.Errorf(ops.EINVALID, "There is no tenant %q.", tenant)
		}
	}
	if kind != "" && !kind.Valid() {
		return 0, ops.Errorf(ops.EINVALID, "There is no operation kind %q.", kind)
	}
	if len(provider) > 64 {
		return 0, ops.Errorf(ops.EINVALID, "The provider name is too long.")
	}
	if !printable(provider) { // Postgres refuses a NUL or bytes that are not UTF-8: a 500, not a page
		return 0, ops.Errorf(ops.EINVALID, "The provider filter holds a character no provider's name has; type the name, such as stripe or openai.")
	}
	return id, nil
}

// tenantOptions are a report's choices of tenant: all, or one by name.
func tenantOptions(tenants []*ops.Tenant, selected string) []views.Option {
	out := []views.Option{{Value: "", Label: "All tenants"}}
	for _, t := range tenants {
		out = append(out, views.Option{Value: t.Name, Label: t.Name, Selected: t.Name == selected})
	}
	return out
}

// kindOptions are a report's choices of operation kind: any, or one of kinds.
func kindOptions(kinds []ops.KindSpec, selected string) []views.Option {
	out := []views.Option{{Value: "", Label: "Any kind"}}
	for _, k := range kinds {
		out = append(out, views.Option{Value: string(k.Kind), Label: string(k.Kind), Selected: string(k.Kind) == selected})
	}
	return out
}

// reconReport reads the report's filter from the request and the rollup rows it selects.
func (s *Server) reconReport(r *http.Request) (reconQuery, []recon.MetricsRow, error) {
	q, err := s.parseReconQuery(r.Context(), r.URL.Query())
	if err != nil {
		return q, nil, err
	}
	rows, err := s.Recon.RollupMetrics(r.Context(), q.filter)
	return q, rows, err
}

func (s *Server) handleReconcile(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q, rows, err := s.reconReport(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	lo, hi, paging, err := reconPage(q.filter, r.URL.Query())
	if err != nil {
		s.Error(w, r, err)
		return
	}
	state, err := s.Recon.RollupStatus(ctx)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	leases, err := s.Exceptions.Leases(ctx)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	// The export holds the whole range, whatever page is shown.
	saved, err := s.savedViewsBar(ctx, desk.PageReconcile, r.URL.Query(), nil)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	m := views.ReconcilePage{Viewer: viewer(userFrom(ctx)), Filter: q.form, CSVURL: "/reconcile.csv?" + withPage(r.URL.Query(), 0),
		Paging: paging, Saved: saved}
	m.Freshness, m.Stale = freshness(state, s.Clock.Now())
	for _, rg := range reconRanges {
		m.Ranges = append(m.Ranges, views.Option{Value: rg.value, Label: rg.label, Selected: rg.value == q.form.Range})
	}
	m.Buckets = []views.Option{{Value: "hour", Label: "hour", Selected: q.form.Bucket == "hour"},
		{Value: "day", Label: "day", Selected: q.form.Bucket == "day"}}
	m.Tenants, m.Kinds, m.APIs = tenantOptions(q.tenants, q.form.Tenant), kindOptions(s.kinds(), q.form.Kind), apiOptions(q.apis, q.form.API)
	for _, c := range reconColumns {
		m.Headers = append(m.Headers, c.header)
	}
	now := s.Clock.Now()
	for _, l := range leases {
		run := views.ReconRun{Provider: strings.TrimPrefix(l.Name, "reconcile:"), LastRun: "never", DoneUntil: "—",
			Running: l.Until != nil && l.Until.After(now)}
		if l.LastRunAt != nil {
			run.LastRun = l.LastRunAt.UTC().Format("2006-01-02 15:04") + " (" + now.Sub(*l.LastRunAt).Truncate(time.Second).String() + " ago)"
		}
		if l.DoneUntil != nil {
			run.DoneUntil = l.DoneUntil.UTC().Format("2006-01-02 15:04")
		}
		var rep struct {
			NewCharges    int `json:"new_charges"`
			NewExceptions int `json:"new_exceptions"`
		}
		if json.Unmarshal(l.LastReport, &rep) == nil && len(l.LastReport) > 0 {
			run.Summary = fmt.Sprintf("Last run: %d new charges, %d new exceptions.", rep.NewCharges, rep.NewExceptions)
		}
		m.Runs = append(m.Runs, run)
	}
	// Newest window first: the current state of things is what people come for. The total
	// covers the whole range, whatever page is shown.
	total := recon.MetricsRow{Saved: recon.Money{}, Lost: recon.Money{}}
	for i := len(rows) - 1; i >= 0; i-- {
		if !rows[i].Bucket.Before(lo) && rows[i].Bucket.Before(hi) {
			m.Rows = append(m.Rows, s.reconRow(rows[i], q, true))
		}
		addMetrics(&total, rows[i])
	}
	m.Total = s.reconRow(total, q, false)
	m.Total.Window = "Total"
	s.render(w, r, http.StatusOK, views.Reconcile(m))
}

// reconPageSpan is how much of a table with windows narrower than it one page shows. A week
// per hour is 2,520 rows at 15 groups; rendering them, not reading them, made most of that
// page's 80 ms at 10 million operations. A day per page keeps it near the 24-hour table.
const reconPageSpan = 24 * time.Hour

// reconPage reads the page asked for (?page=, 1 the newest) and returns the windows it
// holds, [lo, hi), and the pager; the pager is nil when the range fits on one page. Pages
// hold reconPageSpan of windows counted back from the range's end; the oldest page takes
// the few windows left over, so a 24-hour range (25 windows with the current one) stays
// one page.
func reconPage(f recon.MetricsFilter, q url.Values) (lo, hi time.Time, paging *views.ReconPaging, err error) {
	page := 1
	if v := q.Get("page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 1 {
			return lo, hi, nil, ops.Errorf(ops.EINVALID, "There is no page %q; pages are numbered from 1.", v)
		}
	}
	width := f.Bucket
	windows := int(f.To.Sub(f.From) / width)
	per := windows
	if width < reconPageSpan {
		per = int(reconPageSpan / width)
	}
	pages := max(1, windows/per)
	if page > pages {
		return lo, hi, nil, ops.Errorf(ops.EINVALID, "This report has %d %s; there is no page %d.", pages, plural(int64(pages), "page", "pages"), page)
	}
	hi = f.To.Add(-time.Duration((page-1)*per) * width)
	lo = hi.Add(-time.Duration(per) * width)
	if page == pages {
		lo = f.From
	}
	if pages == 1 {
		return lo, hi, nil, nil
	}
	paging = &views.ReconPaging{Label: fmt.Sprintf("Page %d of %d: windows %s to %s UTC.", page, pages,
		windowLabel(lo, width), windowLabel(hi.Add(-width), width))}
	if page > 1 {
		paging.NewerURL = "/reconcile?" + withPage(q, page-1)
	}
	if page < pages {
		paging.OlderURL = "/reconcile?" + withPage(q, page+1)
	}
	return lo, hi, paging, nil
}

// withPage encodes q asking for page n; n of 0 or 1 leaves the page out (the first page, or
// the whole range for the CSV export).
func withPage(q url.Values, n int) string {
	v := url.Values{}
	for k, vs := range q {
		v[k] = vs
	}
	v.Del("page")
	if n > 1 {
		v.Set("page", strconv.Itoa(n))
	}
	return v.Encode()
}

func addMetrics(t *recon.MetricsRow, r recon.MetricsRow) {
	t.ClientRequests += r.ClientRequests
	t.Rejected += r.Rejected
	t.Cancels += r.Cancels
	t.Duplicates += r.Duplicates
	t.Replays += r.Replays
	t.Operations += r.Operations
	t.Succeeded += r.Succeeded
	t.AttemptsSent += r.AttemptsSent
	t.Timeouts += r.Timeouts
	t.Charges += r.Charges
	t.Orphans += r.Orphans
	t.DoubleCharges += r.DoubleCharges
	for c, v := range r.Saved {
		t.Saved.Add(c, v)
	}
	for c, v := range r.Lost {
		t.Lost.Add(c, v)
	}
}

func (s *Server) reconRow(r recon.MetricsRow, q reconQuery, links bool) views.ReconcileRow {
	out := views.ReconcileRow{Window: windowLabel(r.Bucket, q.filter.Bucket), Tenant: tenantLabel(r.TenantID, q.names),
		Kind: string(r.Kind), Provider: r.Provider, API: orDash(r.API), Saved: formatMoney(r.Saved), Lost: formatMoney(r.Lost)}
	if out.Kind == "" {
		out.Kind = "—"
	}
	if out.Provider == "" {
		out.Provider = "—"
	}
	diff := r.Difference()
	out.Difference, out.DiffZero = fmt.Sprintf("%+d", diff), diff == 0
	if diff == 0 {
		out.Difference = "0"
	}
	for _, c := range reconColumns {
		v := c.value(r)
		cell := views.ReconCell{Measure: string(c.m), Value: strconv.FormatInt(v, 10), Alert: c.alert && v > 0}
		if links && v > 0 {
			cell.URL = drillURL(r.MetricsKey, q.filter.Bucket, c.m)
		}
		out.Cells = append(out.Cells, cell)
	}
	return out
}

func drillURL(k recon.MetricsKey, width time.Duration, m recon.Measure) string {
	v := url.Values{"at": {k.Bucket.UTC().Format(time.RFC3339)}, "width": {width.String()}, "tenant": {strconv.FormatInt(k.TenantID, 10)},
		"kind": {string(k.Kind)}, "provider": {k.Provider}, "api": {k.API}, "measure": {string(m)}}
	return "/reconcile/drill?" + v.Encode()
}

func windowLabel(b time.Time, width time.Duration) string {
	if b.IsZero() {
		return ""
	}
	if width >= 24*time.Hour {
		return b.UTC().Format("2006-01-02")
	}
	return b.UTC().Format("2006-01-02 15:04")
}

func tenantLabel(id int64, names map[int64]string) string {
	if id == 0 {
		return "—"
	}
	if n := names[id]; n != "" {
		return n
	}
	return strconv.FormatInt(id, 10)
}

// formatMoney writes amounts per currency with ops' one money formatter, a dash for none.
func formatMoney(m recon.Money) string {
	if len(m) == 0 {
		return "—"
	}
	return m.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// tenantNames maps tenant ids to names for the pages that show rows of every tenant.
func (s *Server) tenantNames(ctx context.Context) (map[int64]string, error) {
	tenants, err := s.Accounts.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	names := make(map[int64]string, len(tenants))
	for _, t := range tenants {
		names[t.ID] = t.Name
	}
	return names, nil
}

// withTenantNames runs read, which fetches what a page lists, then reads the tenant names
// that label its rows. It answers the first error itself and returns false.
func withTenantNames[T any](s *Server, w http.ResponseWriter, r *http.Request, read func(context.Context) (T, error)) (T, map[int64]string, bool) {
	ctx := r.Context()
	v, err := read(ctx)
	var names map[int64]string
	if err == nil {
		names, err = s.tenantNames(ctx)
	}
	if err != nil {
		s.Error(w, r, err)
		return v, nil, false
	}
	return v, names, true
}
