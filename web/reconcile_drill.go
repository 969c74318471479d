package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/views"
)

// measureTitles names each measure as its column header does, so a drill-down's title
// matches the number that was clicked.
var measureTitles = map[recon.Measure]string{}

func init() {
	for _, c := range reconColumns {
		measureTitles[c.m] = c.header
	}
}

// handleReconcileDrill lists the recorded rows behind one number.
func (s *Server) handleReconcileDrill(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	at, err := time.Parse(time.RFC3339, q.Get("at"))
	width, werr := time.ParseDuration(q.Get("width"))
	tenant, terr := strconv.ParseInt(q.Get("tenant"), 10, 64)
	if err != nil || werr != nil || terr != nil {
		s.Error(w, r, ops.Errorf(ops.EINVALID, "The link is damaged; go back to the reconciliation page."))
		return
	}
	f := recon.DrillFilter{MetricsKey: recon.MetricsKey{Bucket: at, TenantID: tenant, Kind: ops.Kind(q.Get("kind")), Provider: q.Get("provider"),
		API: q.Get("api")}, Width: width, Measure: recon.Measure(q.Get("measure"))}
	rows, names, ok := withTenantNames(s, w, r, func(ctx context.Context) ([]recon.DrillRow, error) {
		return s.Recon.ReconDrill(ctx, f)
	})
	if !ok {
		return
	}
	// The window is a UTC hour or day, whatever the reader's zone: the heading says so.
	title := fmt.Sprintf("%s · %s UTC · %s · %s · %s", measureTitles[f.Measure], windowLabel(at, width), tenantLabel(tenant, names),
		orDash(string(f.Kind)), orDash(f.Provider))
	if f.API != "" {
		title += " · " + f.API
	}
	m := views.ReconDrillPage{Viewer: viewer(userFrom(ctx)), Title: title, BackURL: "/reconcile", Truncated: len(rows) >= 500}
	if !m.Truncated {
		if m.Gap, err = s.drillGap(ctx, f, len(rows)); err != nil {
			s.Error(w, r, err)
			return
		}
	}
	for _, d := range rows {
		row := views.ReconDrillRow{At: d.At.UTC().Format("2006-01-02 15:04:05"), OperationID: d.OperationID,
			Tenant: tenantLabel(d.TenantID, names), Kind: orDash(string(d.Kind)), Provider: orDash(d.Provider), Ref: d.Ref, Detail: d.Detail}
		if d.AmountCents != 0 {
			row.Amount = ops.FormatMoney(d.AmountCents, d.Currency)
		}
		m.Rows = append(m.Rows, row)
	}
	s.render(w, r, http.StatusOK, views.ReconcileDrill(m))
}

// drillGap compares the figure the table shows for f's cell, read from the rollups as the
// table reads it, with the n rows the drill-down lists, and says why they differ: the
// rollups keep counting the rows the retention removed (ops rule 8), and a list shorter
// than its figure must not pass for all there ever was (ops rule 12). "" when they agree,
// or when the cell is not one the rollups can answer (a damaged link's odd window).
func (s *Server) drillGap(ctx context.Context, f recon.DrillFilter, n int) (string, error) {
	rows, err := s.Recon.RollupMetrics(ctx, recon.MetricsFilter{Window: recon.Window{From: f.Bucket, To: f.Bucket.Add(f.Width)},
		Bucket: f.Width, TenantID: f.TenantID, Kind: f.Kind, Provider: f.Provider, API: f.API})
	if ops.ErrorCode(err) == ops.EINVALID {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var figure int64
	for _, r := range rows {
		if r.MetricsKey == (recon.MetricsKey{Bucket: f.Bucket.UTC(), TenantID: f.TenantID, Kind: f.Kind, Provider: f.Provider, API: f.API}) {
			for _, c := range reconColumns {
				if c.m == f.Measure {
					figure = c.value(r)
				}
			}
		}
	}
	switch {
	case figure > int64(n):
		return fmt.Sprintf("The table counts %d here; %d of them can still be listed. The retention removes the rows of "+
			"operations closed longer ago than it keeps, and the rollups keep counting them.", figure, n), nil
	case figure < int64(n):
		return fmt.Sprintf("The table counts %d here, as of the rollups' last run; %d are recorded now, and the table "+
			"counts the rest once the rollup job has run.", figure, n), nil
	}
	return "", nil
}
