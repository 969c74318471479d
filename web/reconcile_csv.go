package web

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
)

// handleReconcileCSV exports the same rows as the page, one per window, tenant, kind,
// provider and API, with plain numbers for spreadsheets: money saved and lost in a column
// per currency that the rows hold (moneyColumns), never two currencies in one cell.
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
	head = append(head, "difference")
	currencies := moneyCurrencies(rows)
	for _, kind := range []string{"saved", "lost"} {
		for _, c := range currencies {
			head = append(head, moneyColumn(kind, c))
		}
	}
	_ = cw.Write(head)
	for _, row := range rows {
		rec := []string{row.Bucket.UTC().Format(time.RFC3339), csvSafe(tenantLabel(row.TenantID, q.names)), string(row.Kind), csvSafe(row.Provider),
			row.API}
		for _, c := range reconColumns {
			rec = append(rec, strconv.FormatInt(c.value(row), 10))
		}
		rec = append(rec, strconv.FormatInt(row.Difference(), 10))
		for _, m := range []recon.Money{row.Saved, row.Lost} {
			for _, c := range currencies {
				rec = append(rec, plainAmount(m[c], c))
			}
		}
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

// moneyCurrencies lists, in order, the currencies of the money the rows saved or lost, each
// once, as the rows name them.
func moneyCurrencies(rows []recon.MetricsRow) []string {
	seen := map[string]bool{}
	for _, row := range rows {
		for _, m := range []recon.Money{row.Saved, row.Lost} {
			for c := range m {
				seen[c] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// moneyColumn is the name of the column of money of kind (saved, lost) in currency c: the
// code in lower case, any character but a letter or digit written as "_", so that a code
// from a provider names a column and nothing else.
func moneyColumn(kind, c string) string {
	return kind + "_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(c))
}

// plainAmount writes micros (millionths of the currency's unit) as a number a
// spreadsheet reads, in the currency's major unit: the whole units, then as many decimals as
// the currency has minor units, more only where the amount has them (an LLM call costs
// fractions of a cent).
func plainAmount(micros int64, currency string) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	d := ops.MinorUnits(currency)
	const scale = ops.MicrosPerUnit
	frac := strings.TrimRight(fmt.Sprintf("%06d", micros%scale), "0")
	for len(frac) < d {
		frac += "0"
	}
	whole := sign + strconv.FormatInt(micros/scale, 10)
	if frac == "" {
		return whole
	}
	return whole + "." + frac
}
