package fake

import (
	"fmt"
	"math/rand/v2"
	"slices"
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

// ruleSyntax is what sets one fake's fault rules apart from the other's: its kinds, and
// which optional parts its rules may have. K is the fake's kind type.
type ruleSyntax[K ~string] struct {
	kinds []K
	// methods lets a rule name an HTTP method before its path.
	methods bool
	// chunk and lag allow the chunk= and lag= options.
	chunk, lag bool
}

// rule is a fault rule of either fake in one form, so that both are read and checked by
// the same code; each fake copies it to and from its own exported rule type.
type rule[K ~string] struct {
	method, path string
	kind         K
	when
	delay, lag        time.Duration
	chunk, retryAfter int
}

// parseRules reads a compact fault specification of either fake: rules separated by ";" or
// newlines, blank rules ignored, each rule read by syntax, checked, and made into the
// fake's rule type by out.
func parseRules[K ~string, F any](spec string, syntax ruleSyntax[K], out func(rule[K]) F) ([]F, error) {
	var faults []F
	for i, raw := range strings.FieldsFunc(spec, func(r rune) bool { return r == ';' || r == '\n' }) {
		words := strings.Fields(raw)
		if len(words) == 0 {
			continue
		}
		r, err := syntax.parse(words)
		if err == nil {
			err = syntax.check(r)
		}
		if err != nil {
			return nil, fmt.Errorf("fault rule %d %q: %w", i+1, strings.TrimSpace(raw), err)
		}
		faults = append(faults, out(r))
	}
	return faults, nil
}

// parse reads the words of one rule: [ method ] [ path ] kind { option }, a method only
// where the syntax allows one.
func (s ruleSyntax[K]) parse(words []string) (rule[K], error) {
	var r rule[K]
	kindAt := slices.IndexFunc(words, func(w string) bool { return slices.Contains(s.kinds, K(w)) })
	if kindAt < 0 {
		return r, fmt.Errorf("no fault kind (one of %v)", s.kinds)
	}
	r.kind = K(words[kindAt])
	for _, w := range words[:kindAt] {
		switch {
		case strings.HasPrefix(w, "/") || w == "*" && (r.method != "" || !s.methods):
			if r.path != "" {
				return r, fmt.Errorf("two paths: %q and %q", r.path, w)
			}
			r.path = w
		case s.methods && r.method == "" && r.path == "" && isMethod(w):
			r.method = strings.ToUpper(w)
		default:
			return r, fmt.Errorf("unexpected %q before the fault kind", w)
		}
	}
	return r, s.parseOptions(&r, words[kindAt+1:])
}

// parseOptions reads the options of a rule: "p=" float, "calls=" list, "delay=" duration,
// "retry_after=" int, "times=" int, and where the syntax allows them "chunk=" int and
// "lag=" duration.
func (s ruleSyntax[K]) parseOptions(r *rule[K], words []string) error {
	for _, w := range words {
		name, value, ok := strings.Cut(w, "=")
		if !ok || value == "" {
			return fmt.Errorf("option %q: want name=value", w)
		}
		var err error
		switch strings.ToLower(name) {
		case "p", "probability":
			r.probability, err = strconv.ParseFloat(value, 64)
		case "calls", "call":
			r.calls, err = parseCalls(value)
		case "delay":
			r.delay, err = time.ParseDuration(value)
		case "chunk":
			if !s.chunk {
				return fmt.Errorf("unknown option %q", name)
			}
			r.chunk, err = strconv.Atoi(value)
		case "lag":
			if !s.lag {
				return fmt.Errorf("unknown option %q", name)
			}
			r.lag, err = time.ParseDuration(value)
		case "retry_after", "retry-after":
			r.retryAfter, err = strconv.Atoi(value)
		case "times":
			r.times, err = strconv.Atoi(value)
		default:
			return fmt.Errorf("unknown option %q", name)
		}
		if err != nil {
			return fmt.Errorf("option %q: %w", w, err)
		}
	}
	return nil
}

// check reports whether a rule can be used, whether it was parsed or sent as JSON: a known
// kind, a timing that can be used, no negative amount, and a path that is "*" or starts
// with "/".
func (s ruleSyntax[K]) check(r rule[K]) error {
	if !slices.Contains(s.kinds, r.kind) {
		return fmt.Errorf("unknown fault kind %q (want one of %v)", r.kind, s.kinds)
	}
	if err := r.when.check(); err != nil {
		return err
	}
	for _, n := range []struct {
		name     string
		negative bool
	}{
		{"delay", r.delay < 0}, {"lag", r.lag < 0}, {"chunk", r.chunk < 0},
		{"retry_after", r.retryAfter < 0}, {"times", r.times < 0},
	} {
		if n.negative {
			return fmt.Errorf("fault %s must not be negative", n.name)
		}
	}
	if r.path != "" && r.path != "*" && !strings.HasPrefix(r.path, "/") {
		return fmt.Errorf("fault path %q must start with /", r.path)
	}
	return nil
}

func isMethod(w string) bool {
	if w == "*" {
		return true
	}
	switch strings.ToUpper(w) {
	case "GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS":
		return true
	}
	return false
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
