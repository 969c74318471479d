package fake

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// when is the part of a fault rule that says which matching requests it hits: the listed
// 1-based call numbers, or else each with a probability (0 meaning always), at most times
// times in all (0 meaning no cap).
type when struct {
	calls       []int
	probability float64
	times       int
}

// check reports whether the timing can be used: a probability within 0..1 and call numbers
// from 1.
func (w when) check() error {
	if w.probability < 0 || w.probability > 1 {
		return fmt.Errorf("fault probability %v is outside 0..1", w.probability)
	}
	for _, c := range w.calls {
		if c < 1 {
			return fmt.Errorf("fault call number %d: call numbers start at 1", c)
		}
	}
	return nil
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

// parseRules reads a compact fault specification of either fake: rules separated by ";" or
// newlines, blank rules ignored, each rule's words read by rule.
func parseRules[F any](spec string, rule func(words []string) (F, error)) ([]F, error) {
	var faults []F
	for i, raw := range strings.FieldsFunc(spec, func(r rune) bool { return r == ';' || r == '\n' }) {
		words := strings.Fields(raw)
		if len(words) == 0 {
			continue
		}
		f, err := rule(words)
		if err != nil {
			return nil, fmt.Errorf("fault rule %d %q: %w", i+1, strings.TrimSpace(raw), err)
		}
		faults = append(faults, f)
	}
	return faults, nil
}

// ruleOptions points at the fields of a fault rule that its name=value options set. chunk
// is nil for a fake whose rules have no chunk option.
type ruleOptions struct {
	probability *float64
	calls       *[]int
	delay       *time.Duration
	chunk       *int
	retryAfter  *int
	times       *int
}

// parse reads the options of a rule: "p=" float, "calls=" list, "delay=" duration,
// "chunk=" int, "retry_after=" int and "times=" int.
func (o ruleOptions) parse(words []string) error {
	for _, w := range words {
		name, value, ok := strings.Cut(w, "=")
		if !ok || value == "" {
			return fmt.Errorf("option %q: want name=value", w)
		}
		var err error
		switch strings.ToLower(name) {
		case "p", "probability":
			*o.probability, err = strconv.ParseFloat(value, 64)
		case "calls", "call":
			*o.calls, err = parseCalls(value)
		case "delay":
			*o.delay, err = time.ParseDuration(value)
		case "chunk":
			if o.chunk == nil {
				return fmt.Errorf("unknown option %q", name)
			}
			*o.chunk, err = strconv.Atoi(value)
		case "retry_after", "retry-after":
			*o.retryAfter, err = strconv.Atoi(value)
		case "times":
			*o.times, err = strconv.Atoi(value)
		default:
			return fmt.Errorf("unknown option %q", name)
		}
		if err != nil {
			return fmt.Errorf("option %q: %w", w, err)
		}
	}
	return nil
}

// parseCalls reads "3", "1,4" or "2-5" (ranges inclusive).
func parseCalls(s string) ([]int, error) {
	var calls []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("call number: %w", err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("call range end: %w", err)
			}
		}
		if a < 1 || b < a || b-a > 100000 {
			return nil, fmt.Errorf("bad call range %q", part)
		}
		for c := a; c <= b; c++ {
			calls = append(calls, c)
		}
	}
	return calls, nil
}
