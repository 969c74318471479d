package alerts

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSource answers with counters chosen by the test for each window length.
type fakeSource struct {
	mu       sync.Mutex
	counters func(window time.Duration) []Row
	backlog  []Row
	err      error
}

func (f *fakeSource) Counters(_ context.Context, from, to time.Time) ([]Row, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if f.counters == nil {
		return nil, nil
	}
	return f.counters(to.Sub(from)), nil
}

// CountersAll is Counters of each window: the fake counts nothing it could share.
func (f *fakeSource) CountersAll(ctx context.Context, windows []Window) ([][]Row, error) {
	out := make([][]Row, len(windows))
	for i, w := range windows {
		rows, err := f.Counters(ctx, w.From, w.To)
		if err != nil {
			return nil, err
		}
		out[i] = rows
	}
	return out, nil
}

func (f *fakeSource) Backlog(context.Context, time.Time) ([]Row, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.backlog, f.err
}

func (f *fakeSource) set(fn func(time.Duration) []Row) {
	f.mu.Lock()
	f.counters = fn
	f.mu.Unlock()
}

// memStore keeps alert state in memory, as the Postgres store does in tables.
type memStore struct {
	mu        sync.Mutex
	instances map[string]Instance
	history   []Transition
	statuses  map[string]RuleStatus
	outbox    []Notification
}

func newMemStore() *memStore {
	return &memStore{instances: map[string]Instance{}, statuses: map[string]RuleStatus{}}
}

func (m *memStore) AlertInstances(context.Context) ([]Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Instance
	for _, in := range m.instances {
		out = append(out, in)
	}
	return out, nil
}

func (m *memStore) SaveAlertPass(_ context.Context, p Pass) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, in := range p.Upserts {
		m.instances[in.Key] = in
	}
	for _, k := range p.Deletes {
		delete(m.instances, k)
	}
	m.history = append(m.history, p.History...)
	for _, s := range p.Statuses {
		m.statuses[s.RuleKey] = s
	}
	m.outbox = append(m.outbox, p.Notifications...)
	return nil
}

// takeOutbox returns and forgets the notifications written so far.
func (m *memStore) takeOutbox() []Notification {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.outbox
	m.outbox = nil
	return out
}

func (m *memStore) states() map[string]State {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]State{}
	for _, in := range m.instances {
		out[labelString(in.Labels)] = in.State
	}
	return out
}

var t0 = time.Date(2025, 3, 1, 3, 0, 0, 0, time.UTC)

// manualClock is a Clock the test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type harness struct {
	clock *manualClock
	src   *fakeSource
	store *memStore
	ev    *Evaluator
}

func newHarness(t *testing.T, rules string) *harness {
	t.Helper()
	set, err := Parse("test.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{clock: &manualClock{now: t0}, src: &fakeSource{}, store: newMemStore()}
	h.ev = &Evaluator{Rules: set, Source: h.src, Store: h.store, Clock: h.clock,
		Receivers:   []ReceiverInfo{{Name: "alertmanager", EveryEvaluation: true}, {Name: "webhook:x"}},
		ExternalURL: "http://settle.test"}
	return h
}

func (h *harness) run(t *testing.T) PassResult {
	t.Helper()
	res, err := h.ev.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (h *harness) step(t *testing.T, d time.Duration) PassResult {
	t.Helper()
	h.clock.Advance(d)
	return h.run(t)
}

func (h *harness) only(t *testing.T) Instance {
	t.Helper()
	ins, _ := h.store.AlertInstances(context.Background())
	if len(ins) != 1 {
		t.Fatalf("%d instances, want 1: %+v", len(ins), ins)
	}
	return ins[0]
}

func timeouts(attempts, timeouts float64) func(time.Duration) []Row {
	return func(time.Duration) []Row {
		return []Row{{Tenant: "acme", Kind: "refund", Provider: "stripe",
			Values: map[Signal]float64{Attempts: attempts, Timeouts: timeouts}}}
	}
}

const timeoutRule = `
groups:
  - name: g
    interval: 1m
    rules:
      - alert: TimeoutRateHigh
        expr:
          ratio: timeouts / attempts
          window: 1h
          above: 0.1
          min_requests: 20
          by: [tenant, kind, provider]
        for: 2m
        keep_firing_for: 5m
        labels: {severity: page}
        annotations:
          summary: "{{ $value | humanizePercentage }} of {{ $labels.provider }} attempts time out"
`

func receivers(ns []Notification) map[string][]Notification {
	out := map[string][]Notification{}
	for _, n := range ns {
		out[n.Receiver] = append(out[n.Receiver], n)
	}
	return out
}

func TestPendingThenFiringAfterFor(t *testing.T) {
	h := newHarness(t, timeoutRule)
	h.src.set(timeouts(100, 50))

	h.run(t)
	if in := h.only(t); in.State != StatePending {
		t.Fatalf("state %s at once, want pending", in.State)
	}
	if n := h.store.takeOutbox(); len(n) != 0 {
		t.Fatalf("a pending alert was notified: %+v", n)
	}
	h.step(t, time.Minute)
	if in := h.only(t); in.State != StatePending {
		t.Fatalf("state %s after 1m of a 2m 'for', want pending", in.State)
	}
	h.step(t, time.Minute)
	in := h.only(t)
	if in.State != StateFiring || !in.FiredAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("state %s fired at %s after 2m, want firing at t0+2m", in.State, in.FiredAt)
	}
	if in.Value != 0.5 || in.Annotations["summary"] != "50% of stripe attempts time out" {
		t.Fatalf("value %v annotations %v", in.Value, in.Annotations)
	}
	want := map[string]string{"alertname": "TimeoutRateHigh", "severity": "page", "tenant": "acme", "kind": "refund", "provider": "stripe"}
	if labelString(in.Labels) != labelString(want) {
		t.Fatalf("labels %v, want %v", in.Labels, want)
	}
	byR := receivers(h.store.takeOutbox())
	for _, r := range []string{"alertmanager", "webhook:x"} {
		if len(byR[r]) != 1 || byR[r][0].Notice.Status != "firing" || byR[r][0].Resend {
			t.Fatalf("%s got %+v, want one firing notification", r, byR[r])
		}
	}
	n := byR["alertmanager"][0].Notice
	if !n.StartsAt.Equal(in.FiredAt) || !n.EndsAt.After(h.clock.Now()) || n.GeneratorURL != "http://settle.test/alerts" {
		t.Fatalf("notice %+v", n)
	}
	// Still firing: Alertmanager hears it again every evaluation, the webhook does not.
	h.step(t, time.Minute)
	byR = receivers(h.store.takeOutbox())
	if len(byR["alertmanager"]) != 1 || !byR["alertmanager"][0].Resend || len(byR["webhook:x"]) != 0 {
		t.Fatalf("resend: %+v", byR)
	}
	var path []string
	for _, tr := range h.store.history {
		path = append(path, string(tr.From)+">"+string(tr.To))
	}
	if strings.Join(path, " ") != "inactive>pending pending>firing" {
		t.Fatalf("history %v", path)
	}
}

func TestPendingThatClearsNeverFires(t *testing.T) {
	h := newHarness(t, timeoutRule)
	h.src.set(timeouts(100, 50))
	h.run(t)
	h.src.set(timeouts(100, 0))
	h.step(t, time.Minute)
	if ins, _ := h.store.AlertInstances(context.Background()); len(ins) != 0 {
		t.Fatalf("instances %+v after the condition cleared, want none", ins)
	}
	if n := h.store.takeOutbox(); len(n) != 0 {
		t.Fatalf("notified %+v", n)
	}
}

func TestRecoveringThenInactiveAfterKeepFiringFor(t *testing.T) {
	h := newHarness(t, strings.Replace(timeoutRule, "for: 2m", "for: 0s", 1))
	h.src.set(timeouts(100, 50))
	h.run(t)
	if in := h.only(t); in.State != StateFiring {
		t.Fatalf("state %s with for 0, want firing", in.State)
	}
	h.store.takeOutbox()

	h.src.set(timeouts(100, 1))
	h.step(t, time.Minute)
	in := h.only(t)
	if in.State != StateRecovering {
		t.Fatalf("state %s after the condition cleared, want recovering", in.State)
	}
	// Receivers still see it firing: no flapping resolve to the webhook.
	byR := receivers(h.store.takeOutbox())
	if len(byR["webhook:x"]) != 0 || len(byR["alertmanager"]) != 1 || byR["alertmanager"][0].Notice.Status != "firing" {
		t.Fatalf("recovering notified %+v", byR)
	}
	// A blip back above the threshold while recovering fires again without a new page.
	h.src.set(timeouts(100, 50))
	h.step(t, time.Minute)
	if in := h.only(t); in.State != StateFiring || !in.FiredAt.Equal(t0) {
		t.Fatalf("state %s fired at %s, want firing since t0", in.State, in.FiredAt)
	}
	if byR := receivers(h.store.takeOutbox()); len(byR["webhook:x"]) != 0 {
		t.Fatalf("the webhook was paged again: %+v", byR["webhook:x"])
	}
	h.src.set(timeouts(100, 1))
	for i := 1; i <= 4; i++ {
		h.step(t, time.Minute)
		if in := h.only(t); in.State != StateRecovering {
			t.Fatalf("state %s %dm after the last true evaluation, want recovering within keep_firing_for 5m", in.State, i)
		}
	}
	h.store.takeOutbox()
	h.step(t, time.Minute)
	if ins, _ := h.store.AlertInstances(context.Background()); len(ins) != 0 {
		t.Fatalf("instances %+v after keep_firing_for, want none", ins)
	}
	byR = receivers(h.store.takeOutbox())
	for _, r := range []string{"alertmanager", "webhook:x"} {
		if len(byR[r]) != 1 || byR[r][0].Notice.Status != "resolved" || !byR[r][0].Notice.EndsAt.Equal(h.clock.Now()) {
			t.Fatalf("%s got %+v, want one resolved notification ending now", r, byR[r])
		}
	}
	last := h.store.history[len(h.store.history)-1]
	if last.From != StateRecovering || last.To != StateInactive {
		t.Fatalf("last transition %s > %s", last.From, last.To)
	}
}

func TestQuietUnderTheMinimumSample(t *testing.T) {
	h := newHarness(t, strings.Replace(timeoutRule, "for: 2m", "for: 0s", 1))
	// Three requests at 3 a.m., all timing out: 100%, and nobody is paged.
	h.src.set(timeouts(3, 3))
	h.run(t)
	if ins, _ := h.store.AlertInstances(context.Background()); len(ins) != 0 {
		t.Fatalf("instances %+v under min_requests", ins)
	}
	st := h.store.statuses["g/TimeoutRateHigh{severity=\"page\"}"]
	if st.Health != HealthNoData || !strings.Contains(st.Message, "quiet") {
		t.Fatalf("status %+v, want no data (quiet)", st)
	}
	h.src.set(timeouts(20, 3))
	h.step(t, time.Minute)
	if in := h.only(t); in.State != StateFiring {
		t.Fatalf("state %s at the minimum sample, want firing", in.State)
	}
	if st := h.store.statuses["g/TimeoutRateHigh{severity=\"page\"}"]; st.Health != HealthOK || st.Value != 0.15 {
		t.Fatalf("status %+v", st)
	}
}

func TestNoDataIsShownAsSuch(t *testing.T) {
	h := newHarness(t, timeoutRule)
	h.run(t)
	st := h.store.statuses["g/TimeoutRateHigh{severity=\"page\"}"]
	if st.Health != HealthNoData || st.HasValue {
		t.Fatalf("status %+v with no attempts at all, want no data", st)
	}
}

const burnRule = `
groups:
  - name: g
    rules:
      - alert: TimeoutBurn
        expr:
          ratio: timeouts / attempts
          window: 1h
          short_window: 5m
          burn_rate: 14.4
          objective: 0.99
`

func TestBurnRateNeedsBothWindows(t *testing.T) {
	cases := []struct {
		name        string
		long, short float64 // timeouts per 100 attempts
		fire        bool
	}{
		{"long only: it happened but has stopped", 20, 1, false},
		{"short only: a blip", 1, 50, false},
		{"both", 20, 50, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, burnRule)
			h.src.set(func(w time.Duration) []Row {
				n := c.long
				if w == 5*time.Minute {
					n = c.short
				}
				return []Row{{Tenant: "acme", Values: map[Signal]float64{Attempts: 100, Timeouts: n}}}
			})
			h.run(t)
			ins, _ := h.store.AlertInstances(context.Background())
			if fired := len(ins) == 1 && ins[0].State == StateFiring; fired != c.fire {
				t.Fatalf("fired %v, want %v (threshold %v)", fired, c.fire, h.ev.Rules.Groups[0].Rules[0].Expr.Threshold)
			}
		})
	}
}

func TestOneInstancePerLabelSet(t *testing.T) {
	h := newHarness(t, strings.NewReplacer("for: 2m", "for: 0s", "by: [tenant, kind, provider]", "by: [tenant]").Replace(timeoutRule))
	h.src.set(func(time.Duration) []Row {
		return []Row{
			{Tenant: "acme", Kind: "refund", Provider: "stripe", Values: map[Signal]float64{Attempts: 50, Timeouts: 10}},
			{Tenant: "acme", Kind: "llm_call", Provider: "openai", Values: map[Signal]float64{Attempts: 50, Timeouts: 10}},
			{Tenant: "globex", Kind: "refund", Provider: "stripe", Values: map[Signal]float64{Attempts: 40, Timeouts: 20}},
			{Tenant: "initech", Kind: "refund", Provider: "stripe", Values: map[Signal]float64{Attempts: 40, Timeouts: 0}},
		}
	})
	for range 3 {
		h.step(t, time.Minute)
	}
	got := h.store.states()
	want := map[string]State{
		`{alertname="TimeoutRateHigh", severity="page", tenant="acme"}`:   StateFiring,
		`{alertname="TimeoutRateHigh", severity="page", tenant="globex"}`: StateFiring,
	}
	if len(got) != len(want) {
		t.Fatalf("instances %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("instances %v, want %v", got, want)
		}
	}
	var acme Instance
	ins, _ := h.store.AlertInstances(context.Background())
	for _, in := range ins {
		if in.Labels["tenant"] == "acme" {
			acme = in
		}
	}
	if acme.Value != 0.2 {
		t.Fatalf("acme's value %v, want the sum of both kinds: 20/100", acme.Value)
	}
	if n := len(h.store.history); n != 2 {
		t.Fatalf("%d transitions over three passes, want 2", n)
	}
}

func TestCountsAndAges(t *testing.T) {
	h := newHarness(t, `
groups:
  - name: g
    rules:
      - alert: UnknownTooOld
        expr: {age: oldest_unknown, above: 4h, by: [tenant]}
      - alert: DoubleCharge
        expr: {count: double_charges, window: 24h, above: 0}
      - alert: Mismatch
        expr: {count: charge_difference, window: 1h, offset: 1h, above: 0, by: [provider]}
`)
	h.src.backlog = []Row{
		{Tenant: "acme", Kind: "refund", Values: map[Signal]float64{UnknownOperations: 3, OldestUnknown: 3 * 3600}},
		{Tenant: "acme", Kind: "llm_call", Values: map[Signal]float64{UnknownOperations: 1, OldestUnknown: 5 * 3600}},
		{Tenant: "globex", Kind: "refund", Values: map[Signal]float64{UnknownOperations: 1, OldestUnknown: 60}},
	}
	var windows []time.Duration
	h.src.set(func(w time.Duration) []Row {
		windows = append(windows, w)
		return []Row{{Tenant: "acme", Kind: "refund", Provider: "stripe",
			Values: map[Signal]float64{DoubleCharges: 1, ProviderCharges: 10, Succeeded: 9}}}
	})
	h.run(t)
	got := h.store.states()
	for _, k := range []string{`{alertname="UnknownTooOld", tenant="acme"}`, `{alertname="DoubleCharge"}`,
		`{alertname="Mismatch", provider="stripe"}`} {
		if got[k] != StateFiring {
			t.Fatalf("%s is %q; instances %v", k, got[k], got)
		}
	}
	if len(got) != 3 {
		t.Fatalf("instances %v, want 3", got)
	}
	if len(windows) != 2 {
		t.Fatalf("read %d windows, want each distinct window once: %v", len(windows), windows)
	}
}

func TestAnEvaluationErrorIsNotAnAllClear(t *testing.T) {
	h := newHarness(t, strings.Replace(timeoutRule, "for: 2m", "for: 0s", 1))
	h.src.set(timeouts(100, 50))
	h.run(t)
	h.store.takeOutbox()
	h.src.mu.Lock()
	h.src.err = errors.New("database is down")
	h.src.mu.Unlock()
	for range 10 {
		h.step(t, time.Minute)
	}
	if in := h.only(t); in.State != StateFiring {
		t.Fatalf("state %s during errors, want firing as before", in.State)
	}
	st := h.store.statuses["g/TimeoutRateHigh{severity=\"page\"}"]
	if st.Health != HealthError || !strings.Contains(st.Message, "database is down") {
		t.Fatalf("status %+v, want the error", st)
	}
	for _, n := range h.store.takeOutbox() {
		if n.Notice.Status != "firing" {
			t.Fatalf("notified %s during errors", n.Notice.Status)
		}
	}
}

// A pass evaluates only the groups that are due by this evaluator's schedule; once it has
// forgotten it (another replica evaluated meanwhile), the next pass evaluates every group.
func TestForgottenScheduleEvaluatesEveryGroup(t *testing.T) {
	h := newHarness(t, timeoutRule)
	h.src.set(timeouts(100, 50))
	if res := h.run(t); res.Evaluated == 0 {
		t.Fatal("the first pass evaluated nothing")
	}
	if res := h.step(t, time.Second); res.Evaluated != 0 {
		t.Fatalf("a pass a second later evaluated %d rules, want none due", res.Evaluated)
	}
	h.ev.Forget()
	if res := h.step(t, time.Second); res.Evaluated == 0 {
		t.Fatal("a pass after Forget evaluated nothing")
	}
}

func TestRemovedRuleResolvesItsAlerts(t *testing.T) {
	h := newHarness(t, strings.Replace(timeoutRule, "for: 2m", "for: 0s", 1))
	h.src.set(timeouts(100, 50))
	h.run(t)
	h.store.takeOutbox()
	h.ev.Rules = mustParse(t, burnRule)
	h.step(t, time.Minute)
	if ins, _ := h.store.AlertInstances(context.Background()); len(ins) != 1 || ins[0].Alert != "TimeoutBurn" {
		t.Fatalf("instances %+v, want only the new rule's", ins)
	}
	for _, n := range h.store.takeOutbox() {
		if n.Notice.Labels["alertname"] == "TimeoutRateHigh" && n.Notice.Status != "resolved" {
			t.Fatalf("notified %+v", n)
		}
	}
}

func mustParse(t *testing.T, s string) *RuleSet {
	t.Helper()
	set, err := Parse("test.yaml", []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return set
}
