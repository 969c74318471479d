package alerts

import (
	"testing"
	"time"
)

// A lease set for the evaluator is renewed every third of it, so a replica that dies hands
// the evaluation over within the lease; without one the lease is three ticks.
func TestEvaluatorLease(t *testing.T) {
	e := &Evaluator{Rules: DefaultRules(), Lease: 3 * time.Second}
	if e.tick() != time.Second || e.lease() != 3*time.Second {
		t.Errorf("lease 3s: tick %s, lease %s; want 1s and 3s", e.tick(), e.lease())
	}
	e = &Evaluator{Rules: DefaultRules()}
	if e.lease() != 3*e.tick() || e.tick() > 15*time.Second {
		t.Errorf("no lease: tick %s, lease %s; want a lease of three ticks", e.tick(), e.lease())
	}
	e = &Evaluator{Rules: DefaultRules(), Lease: 10 * time.Minute}
	if e.tick() > 15*time.Second {
		t.Errorf("a long lease lengthened the tick to %s", e.tick())
	}
}
