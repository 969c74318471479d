package web

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops/recon"
)

// handleReconcileCSV exports the same rows as the page, one per window, tenant, kind,
// provider and API, with plain numbers for spreadsheets.
func (s *Server) handleReconcileCSV(w http.ResponseWriter, r *http.Request) {
	q, rows, err := s.reconReport(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="settle-reconcile-%s-%s.csv"`,
		q.filter.From.Format("20060102T1504"), q.form.Bucket))
	w.Header().Set("Cache-Control", "no-store")
	cw := csv.NewWriter(w)
	head := []string{"window_start", "tenant", "kind", "provider", "api"}
	for _, c := range reconColumns {
		head = append(head, csvColumn(c.m))
	}
	head = append(head, "difference", "saved", "lost")
	_ = cw.Write(head)
	for _, row := range rows {
		rec := []string{row.Bucket.UTC().Format(time.RFC3339), csvSafe(tenantLabel(row.TenantID, q.names)), string(row.Kind), csvSafe(row.Provider),
			row.API}
		for _, c := range reconColumns {
			rec = append(rec, strconv.FormatInt(c.value(row), 10))
		}
		rec = append(rec, strconv.FormatInt(row.Difference(), 10), formatMoney(row.Saved), formatMoney(row.Lost))
		_ = cw.Write(rec)
	}
	cw.Flush()
}

// csvSafe keeps a spreadsheet from reading a cell as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// csvColumn is the export's name of measure m's column: the measure's own, but for the
// attempts, whose column counts only those sent, as the page's "Attempts sent" says; a
// column named "attempts" would pass them off as every attempt recorded (ops rule 12).
func csvColumn(m recon.Measure) string {
	if m == recon.MeasureAttempts {
		return "attempts_sent"
	}
	return string(m)
}
