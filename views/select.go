package views

// Option is one choice of a select box.
type Option struct {
	Value    string
	Label    string
	Selected bool
}

// valueOptions offers values as they are written, the one equal to selected chosen.
func valueOptions(values []string, selected string) []Option {
	opts := make([]Option, len(values))
	for i, v := range values {
		opts[i] = Option{Value: v, Label: v, Selected: v == selected}
	}
	return opts
}
