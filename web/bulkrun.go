package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/views"
)

// BulkLookups runs "look up all matching" over a whole filter in the background.
type BulkLookups interface {
	StartBulkLookup(ctx context.Context, f desk.QueueFilter, label, actor string) (desk.BulkLookup, error)
	StopBulkLookup(ctx context.Context, id int64, actor string) (desk.BulkLookup, error)
	BulkLookup(ctx context.Context, id int64) (desk.BulkLookup, error)
	RunningBulkLookups(ctx context.Context) ([]desk.BulkLookup, error)
}

// mountBulkRuns adds the pages of the bulk lookups: everyone on the dashboard may follow one,
// those who may look up may stop it.
func (s *Server) mountBulkRuns(r chi.Router) {
	s.forRole(r, desk.RoleSupport).Get("/ops/bulk/{id}", s.handleBulkRun)
	s.forRole(r, desk.RoleOncall).Post("/ops/bulk/{id}/stop", s.handleBulkStop)
}

// startBulkRun starts the lookup of everything f matches and sends the person to its page.
func (s *Server) startBulkRun(w http.ResponseWriter, r *http.Request, f desk.QueueFilter, form views.QueueFilter) {
	if s.Bulk == nil {
		s.notConfigured(w, r)
		return
	}
	b, err := s.Bulk.StartBulkLookup(r.Context(), f, filterLabel(form), actor(r))
	if err != nil {
		s.Error(w, r, err)
		return
	}
	http.Redirect(w, r, bulkURL(b.ID), http.StatusSeeOther)
}

func (s *Server) handleBulkRun(w http.ResponseWriter, r *http.Request) {
	b, ok := s.bulkFromURL(w, r)
	if !ok {
		return
	}
	v := viewer(userFrom(r.Context()))
	m := views.BulkRunPage{Viewer: v, Flash: s.popFlash(r.Context()).view(), Run: bulkRow(b, s.Clock.Now()),
		CanStop: v.CanAct() && b.State == desk.BulkRunning, LiveURL: bulkURL(b.ID)}
	for outcome, n := range b.Reasons {
		m.Reasons = append(m.Reasons, views.BulkReason{Outcome: outcome, Label: bulkLabels[outcome], Count: n})
	}
	sort.Slice(m.Reasons, func(i, j int) bool { return m.Reasons[i].Count > m.Reasons[j].Count })
	for _, x := range b.Samples {
		m.Samples = append(m.Samples, views.LookupResult{ID: x.ID, URL: "/ops/" + url.PathEscape(x.ID), Order: x.Order,
			Outcome: x.Outcome, Message: x.Message, NeedsPerson: true})
	}
	s.render(w, r, http.StatusOK, views.BulkRun(m))
}

func (s *Server) handleBulkStop(w http.ResponseWriter, r *http.Request) {
	if !s.formFor(w, r, s.Bulk != nil) {
		return
	}
	id, err := pathID(r, "bulk lookup")
	if err != nil {
		s.Error(w, r, err)
		return
	}
	b, err := s.Bulk.StopBulkLookup(r.Context(), id, actor(r))
	if err != nil {
		s.Error(w, r, err)
		return
	}
	s.putFlash(r.Context(), flashMsg{Kind: "ok", Message: fmt.Sprintf("Stopped after %d of %d operations.", b.Done, b.Total)})
	http.Redirect(w, r, bulkURL(b.ID), http.StatusSeeOther)
}

func (s *Server) bulkFromURL(w http.ResponseWriter, r *http.Request) (desk.BulkLookup, bool) {
	if s.Bulk == nil {
		s.notConfigured(w, r)
		return desk.BulkLookup{}, false
	}
	id, err := pathID(r, "bulk lookup")
	if err != nil {
		s.Error(w, r, err)
		return desk.BulkLookup{}, false
	}
	b, err := s.Bulk.BulkLookup(r.Context(), id)
	if err != nil {
		s.Error(w, r, err)
		return desk.BulkLookup{}, false
	}
	return b, true
}

// runningBulks are the bulk lookups under way, for the queue page.
func (s *Server) runningBulks(ctx context.Context) ([]views.BulkRunRow, error) {
	if s.Bulk == nil {
		return nil, nil
	}
	list, err := s.Bulk.RunningBulkLookups(ctx)
	var rows []views.BulkRunRow
	for _, b := range list {
		rows = append(rows, bulkRow(b, s.Clock.Now()))
	}
	return rows, err
}

func bulkURL(id int64) string { return "/ops/bulk/" + strconv.FormatInt(id, 10) }

// bulkRow is a bulk lookup as the pages show it, with its pace and the time it suggests is
// left.
func bulkRow(b desk.BulkLookup, now time.Time) views.BulkRunRow {
	row := views.BulkRunRow{ID: strconv.FormatInt(b.ID, 10), URL: bulkURL(b.ID), Actor: b.Actor, Filter: b.FilterLabel,
		State: b.State, StartedAt: formatTime(b.StartedAt), StoppedBy: b.StoppedBy, Total: b.Total, Done: b.Done,
		Closed: b.Closed, AlreadyClosed: b.AlreadyClosed, NeedPerson: b.NeedPerson, Percent: 100}
	if b.FinishedAt != nil {
		row.FinishedAt = formatTime(*b.FinishedAt)
	}
	if b.Total > 0 {
		row.Percent = min(100, b.Done*100/b.Total)
	}
	row.Progress = fmt.Sprintf("Running: %d of %d looked up.", b.Done, b.Total)
	if elapsed := now.Sub(b.StartedAt); b.Done > 0 && elapsed > 0 {
		perSecond := float64(b.Done) / elapsed.Seconds()
		row.Progress = fmt.Sprintf("Running: %d of %d looked up, %.1f a second", b.Done, b.Total, perSecond)
		if left := b.Total - b.Done; left > 0 {
			row.Progress += ", about " + formatAge(time.Duration(float64(left)/perSecond*float64(time.Second))) + " left"
		}
		row.Progress += "."
	}
	return row
}

// filterLabel says in words which operations a queue filter matches.
func filterLabel(f views.QueueFilter) string {
	parts := []string{f.Tab + " operations"}
	for _, p := range []struct{ name, v string }{{"tenant", f.Tenant}, {"kind", f.Kind}, {"provider", f.Provider},
		{"older than", f.Age}, {"matching", strings.TrimSpace(f.Search)}} {
		if p.v != "" {
			parts = append(parts, p.name+" "+p.v)
		}
	}
	return strings.Join(parts, ", ")
}
