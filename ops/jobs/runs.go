package jobs

import (
	"slices"
	"strings"
	"sync"
)

// RunStopped is the outcome of a run that ended in an error before it left its job in a
// status of its own (the database did not answer, the job was taken over): the job stays
// running until its lease runs out and another worker takes it over.
const RunStopped = "stopped"

// Runs counts the jobs a process's workers ran, by the outcome each run left its job in: a
// job status (published, failed, queued when it was put back to wait, unknown when its
// generation's outcome is) or RunStopped. It is what the process's metrics export, so an
// operator of workers that run apart from the HTTP server sees them work. A nil Runs counts
// nothing.
type Runs struct {
	mu sync.Mutex
	n  map[string]uint64
}

// RunCount is how many runs ended in one outcome since the process started.
type RunCount struct {
	Outcome string
	N       uint64
}

// ran counts one run that ended in outcome.
func (c *Runs) ran(outcome string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]uint64{}
	}
	c.n[outcome]++
}

// Counts returns the counts by outcome, in the order of the outcomes' names.
func (c *Runs) Counts() []RunCount {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	out := make([]RunCount, 0, len(c.n))
	for o, n := range c.n {
		out = append(out, RunCount{Outcome: o, N: n})
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(x, y RunCount) int { return strings.Compare(x.Outcome, y.Outcome) })
	return out
}

// outcome is what run r left its job in, the run having ended with err.
func (r *run) outcome(err error) string {
	switch {
	case r.parked:
		return string(r.j.Status)
	case err != nil:
		return RunStopped
	}
	return string(StatusPublished)
}
