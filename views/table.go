package views

import "github.com/a-h/templ"

// Table is what a dashboard table shows: its columns, its rows and what to say instead when
// there are no rows. Every such table is drawn by the one dataTable component, so all of them
// share their markup, classes and empty state, and a page says only what goes in the cells.
type Table struct {
	// TestID names the table for the browser tests; "" leaves it unnamed.
	TestID string
	// Class is added to the "ops" class every table has.
	Class   string
	Columns []Column
	Rows    []TableRow
	// Empty, when set, stands in place of the table while it has no rows, named EmptyTestID.
	// Without it an empty table is drawn with its header alone.
	Empty, EmptyTestID string
}

// Column is one header cell; Num right-aligns a column of figures.
type Column struct {
	Label string
	Num   bool
}

// TableRow is one row. Attrs are its data attributes, drawn in their order, which the browser
// tests find rows by.
type TableRow struct {
	Class string
	Attrs templ.OrderedAttributes
	Cells []Cell
}

// Cell is one cell: its Text, or Content where it holds more than words (a link, a badge).
type Cell struct {
	Text    string
	Content templ.Component
	Class   string
	TestID  string
	// Colspan spans more than one column when above 1.
	Colspan int
}

// dataAttr is one of a row's data attributes.
func dataAttr(key, value string) templ.KeyValue[string, any] {
	return templ.KeyValue[string, any]{Key: key, Value: value}
}
