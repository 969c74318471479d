package alerts

import (
	"sort"
	"time"
)

// Firing is one time an alert instance fired: from when it began to fire until it stopped
// (recovering still counts: Alertmanager still hears of it). To is zero while it fires.
type Firing struct {
	Alert  string
	Labels map[string]string
	From   time.Time
	To     time.Time
}

// Firings folds transitions, oldest first, into the times each instance fired, cut to
// [from, to): a firing that began before from starts at from, one still firing ends at to.
func Firings(ts []Transition, from, to time.Time) []Firing {
	open := map[string]*Firing{}
	var out []Firing
	closeAt := func(key string, at time.Time) {
		if f := open[key]; f != nil {
			f.To = at
			if f.To.After(from) && f.From.Before(to) {
				out = append(out, *f)
			}
			delete(open, key)
		}
	}
	for _, t := range ts {
		active := t.To.Active()
		switch {
		case active && open[t.InstanceKey] == nil:
			open[t.InstanceKey] = &Firing{Alert: t.Alert, Labels: t.Labels, From: t.At}
		case !active:
			closeAt(t.InstanceKey, t.At)
		}
	}
	for key := range open {
		closeAt(key, to)
	}
	for i := range out {
		if out[i].From.Before(from) {
			out[i].From = from
		}
		if out[i].To.After(to) {
			out[i].To = to
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].From.Before(out[j].From) })
	return out
}
