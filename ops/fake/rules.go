package fake

import (
	"math/rand/v2"
	"sync"
)

// when is the part of a fault rule that says which matching requests it hits: the listed
// 1-based call numbers, or else each with a probability (0 meaning always), at most times
// times in all (0 meaning no cap).
type when struct {
	calls       []int
	probability float64
	times       int
}

// ruleSet holds one fake's fault rules in the order they were added, with the counters
// that decide when each fires, so both fakes' rules fire alike. F is the fake's rule type.
type ruleSet[F any] struct {
	mu    sync.Mutex
	rng   *rand.Rand
	rules []*firing[F]
}

type firing[F any] struct {
	fault       F
	seen, fired int
}

func newRuleSet[F any](rng *rand.Rand) *ruleSet[F] { return &ruleSet[F]{rng: rng} }

func (s *ruleSet[F]) add(f F) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &firing[F]{fault: f})
}

func (s *ruleSet[F]) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = nil
}

func (s *ruleSet[F]) list() []F {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]F, len(s.rules))
	for i, r := range s.rules {
		out[i] = r.fault
	}
	return out
}

// pick counts a request against every rule that matches it and returns a copy of the first
// rule that fires, or nil. A rule after the one that fired still counts the request, so
// its call numbers do not depend on the rules before it.
func (s *ruleSet[F]) pick(matches func(F) bool, timing func(F) when) *F {
	s.mu.Lock()
	defer s.mu.Unlock()
	var picked *F
	for _, r := range s.rules {
		if !matches(r.fault) {
			continue
		}
		r.seen++
		w := timing(r.fault)
		if picked != nil || (w.times > 0 && r.fired >= w.times) {
			continue
		}
		hit := false
		if len(w.calls) > 0 {
			for _, c := range w.calls {
				hit = hit || c == r.seen
			}
		} else {
			// Draw even when p is 0 or 1 so one rule's presence does not shift the
			// sequence another rule sees depending on its probability.
			draw := s.rng.Float64()
			hit = w.probability == 0 || draw < w.probability
		}
		if hit {
			r.fired++
			f := r.fault
			picked = &f
		}
	}
	return picked
}
