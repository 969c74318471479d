package web

import (
	"sort"
	"strconv"
	"strings"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/views"
)

// apiChoice is one API the reports can be split by: its label, as the rollups and the
// filters name it ("chat_completions"), and its name in words ("chat completions").
type apiChoice struct{ label, name string }

// apiChoices are the APIs the registered kinds call, in the order they were registered,
// each once.
func apiChoices(kinds []ops.KindSpec) []apiChoice {
	var out []apiChoice
	seen := map[string]bool{}
	for _, k := range kinds {
		for _, name := range k.APIs {
			label := ops.Call{API: name}.Label()
			if !seen[label] {
				seen[label] = true
				out = append(out, apiChoice{label: label, name: name})
			}
		}
	}
	return out
}

// checkAPI refuses an API filter that names no API of a registered kind; "" is every API.
func checkAPI(apis []apiChoice, api string) error {
	if api == "" {
		return nil
	}
	labels := make([]string, 0, len(apis))
	for _, a := range apis {
		if a.label == api {
			return nil
		}
		labels = append(labels, a.label)
	}
	if len(labels) == 0 {
		return ops.Errorf(ops.EINVALID, "There is no API %q: no kind of operation this server handles calls one.", api)
	}
	return ops.Errorf(ops.EINVALID, "There is no API %q; choose one of %s.", api, strings.Join(labels, ", "))
}

// apiOptions are a report's choices of API: any, or one of apis.
func apiOptions(apis []apiChoice, selected string) []views.Option {
	out := []views.Option{{Value: "", Label: "Any API"}}
	for _, a := range apis {
		out = append(out, views.Option{Value: a.label, Label: a.name, Selected: a.label == selected})
	}
	return out
}

// byAPI sums the rollup rows of the range per API an LLM operation called: the table that
// splits the LLM figures by API. Rows of no API (refunds, requests refused before they had
// an operation) are left out; an API with no row in the range has none in the table.
func byAPI(apis []apiChoice, rows []recon.MetricsRow) []views.InsightsAPIRow {
	sums := map[string]*recon.MetricsRow{}
	for _, r := range rows {
		if r.API == "" {
			continue
		}
		s := sums[r.API]
		if s == nil {
			s = &recon.MetricsRow{Saved: recon.Money{}, Lost: recon.Money{}}
			sums[r.API] = s
		}
		addMetrics(s, r)
	}
	order := map[string]int{}
	names := map[string]string{}
	for i, a := range apis {
		order[a.label], names[a.label] = i, a.name
	}
	labels := make([]string, 0, len(sums))
	for l := range sums {
		labels = append(labels, l)
	}
	// The registered order; an API no kind registers any more (its calls are history) last.
	sort.Slice(labels, func(i, j int) bool {
		oi, iok := order[labels[i]]
		oj, jok := order[labels[j]]
		if iok != jok {
			return iok
		}
		if oi != oj {
			return oi < oj
		}
		return labels[i] < labels[j]
	})
	out := make([]views.InsightsAPIRow, 0, len(labels))
	for _, l := range labels {
		s := sums[l]
		name := names[l]
		if name == "" {
			name = strings.ReplaceAll(l, "_", " ")
		}
		n := func(v int64) string { return strconv.FormatInt(v, 10) }
		out = append(out, views.InsightsAPIRow{Label: l, API: name, Requests: n(s.ClientRequests), Duplicates: n(s.Duplicates),
			Replays: n(s.Replays), AttemptsSent: n(s.AttemptsSent), Timeouts: n(s.Timeouts), DoubleCharges: n(s.DoubleCharges),
			Saved: formatMoney(s.Saved), Lost: formatMoney(s.Lost)})
	}
	return out
}
