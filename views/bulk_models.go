package views

import "github.com/a-h/templ"

// lookupTable lists what came of each lookup; empty, with its test id, stands in for no rows.
func lookupTable(rows []LookupResult, empty, emptyTestID string) Table {
	t := Table{
		TestID:      "bulk-table",
		Columns:     []Column{{Label: "Operation"}, {Label: "Order"}, {Label: "Result"}, {Label: "What happened"}},
		Empty:       empty,
		EmptyTestID: emptyTestID,
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, TableRow{
			Attrs: templ.OrderedAttributes{dataAttr("data-testid", "bulk-row"), dataAttr("data-id", r.ID), dataAttr("data-outcome", r.Outcome)},
			Cells: []Cell{
				{Content: lookupOperation(r)},
				{Content: clipped(r.Order)},
				{Content: lookupOutcome(r)},
				{Text: r.Message, Class: "wrap"},
			},
		})
	}
	return t
}
