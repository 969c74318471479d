package alerts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Row is the numbers of one tenant, kind, provider and API. Empty strings mean "none": a charge
// with no operation has no kind.
type Row struct {
	Tenant, Kind, Provider string
	// API is the API an LLM operation called, for the signals a source splits by it; empty
	// for the others.
	API    string
	Values map[Signal]float64
}

// Source reads the numbers rules compare. Every call reads recorded rows: nothing is
// estimated.
type Source interface {
	// Counters returns the windowed signals counted over [from, to).
	Counters(ctx context.Context, from, to time.Time) ([]Row, error)
	// CountersAll is Counters of each of windows, out[i] for windows[i], read together: what
	// one pass asks for, so that rows two windows share are read once. An error fails them
	// all; the evaluator then asks for each window alone, so that one bad window fails alone.
	CountersAll(ctx context.Context, windows []Window) ([][]Row, error)
	// Backlog returns the open operations in unknown and expired, with the ages in seconds
	// of the oldest of each, as of now.
	Backlog(ctx context.Context, now time.Time) ([]Row, error)
}

// Window is a range of time [From, To) that windowed signals are counted over.
type Window struct{ From, To time.Time }

// State is where an alert instance is in its life.
type State string

// The states of an alert instance: inactive → pending (condition true, waiting for 'for')
// → firing → recovering (condition false, within 'keep_firing_for') → inactive. An inactive
// instance has no row.
const (
	StateInactive   State = "inactive"
	StatePending    State = "pending"
	StateFiring     State = "firing"
	StateRecovering State = "recovering"
)

// Active reports whether Alertmanager should see the instance as firing.
func (s State) Active() bool { return s == StateFiring || s == StateRecovering }

// Health says whether the last evaluation of a rule could be trusted.
type Health string

// A rule's health. No data and errors are never shown as OK.
const (
	HealthUnknown Health = "unknown"
	HealthOK      Health = "ok"
	HealthNoData  Health = "no_data"
	HealthError   Health = "error"
)

// Instance is one alert: one rule and one label set.
type Instance struct {
	// Key is a fingerprint of the labels; RuleKey names the rule.
	Key         string
	RuleKey     string
	Alert       string
	Labels      map[string]string
	Annotations map[string]string
	State       State
	// Value is the rule's value for this label set at the last evaluation.
	Value float64
	// ActiveAt is when the condition became true; FiredAt when the instance began to fire;
	// LastTrueAt the last evaluation where the condition held; Since when the state began.
	ActiveAt   time.Time
	FiredAt    time.Time
	LastTrueAt time.Time
	Since      time.Time
}

// RuleStatus is the outcome of a rule's last evaluation, for the alerts page.
type RuleStatus struct {
	RuleKey string
	Group   string
	Alert   string
	Health  Health
	// Message explains no data or an error.
	Message string
	// Value is the highest value over the rule's label sets; HasValue is false when no label
	// set had data.
	Value       float64
	HasValue    bool
	EvaluatedAt time.Time
}

// Transition is one line of the history: an instance changed state.
type Transition struct {
	At          time.Time
	RuleKey     string
	Alert       string
	InstanceKey string
	Labels      map[string]string
	From, To    State
	Value       float64
}

// Notice is what a receiver is told about one alert, in the terms of Alertmanager.
type Notice struct {
	Status       string            `json:"status"` // firing or resolved
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// Notification is one Notice for one receiver. It becomes an outbox row written in the
// same transaction as the state change it reports (ops rule 10).
type Notification struct {
	Receiver    string
	InstanceKey string
	// Resend marks a repeat of an unchanged firing alert; a newer notification for the same
	// receiver and instance makes an undelivered resend pointless.
	Resend bool
	Notice Notice
}

// Pass is everything one evaluation writes, in one transaction.
type Pass struct {
	Now           time.Time
	Upserts       []Instance
	Deletes       []string
	History       []Transition
	Statuses      []RuleStatus
	Notifications []Notification
}

// Store keeps alert state, history and the outbox of notifications.
type Store interface {
	// AlertInstances returns every instance that is not inactive.
	AlertInstances(ctx context.Context) ([]Instance, error)
	// SaveAlertPass writes a pass atomically: state, history, statuses and outbox rows.
	SaveAlertPass(ctx context.Context, p Pass) error
}

// ReceiverInfo is what the evaluator needs to know of a receiver.
type ReceiverInfo struct {
	Name string
	// EveryEvaluation is true for Alertmanager, which expects firing alerts to be re-sent
	// every evaluation (as Prometheus does) and resolves those it stops hearing about.
	// Webhooks hear about changes only.
	EveryEvaluation bool
}

// Clock tells the evaluator and the collector the time; ops.Clock is one.
type Clock interface {
	Now() time.Time
}

// ErrNoReceiver is SendTest's refusal when no receiver is configured.
var ErrNoReceiver = errors.New("no alert receiver is configured")

// Evaluator evaluates the rules on a clock, keeps the state of every alert instance and
// writes notifications to the outbox. One replica at a time may run it: the server runs its
// passes, every Tick, under a role that stays with one replica (see ops.Role).
type Evaluator struct {
	Rules     *RuleSet
	Source    Source
	Store     Store
	Clock     Clock
	Receivers []ReceiverInfo
	// Tick is how often a pass looks for due groups (Interval); default the shortest group
	// interval, at most 15 s, and at most a third of Lease.
	Tick time.Duration
	// Lease is how long the role the passes run under lasts unless renewed, which each pass
	// does: when the replica that evaluates dies, another takes over within it. Default three
	// ticks.
	Lease time.Duration
	// ExternalURL is where people reach Settle; alerts link to its /alerts page.
	ExternalURL string
	Logger      *slog.Logger

	lastEval  map[string]time.Time
	lastPrune time.Time
}

// Pruner is a Store that can forget delivered notifications and old history.
type Pruner interface {
	PruneAlerts(ctx context.Context, deliveredBefore, historyBefore time.Time) error
}

// How long delivered notifications and the history are kept.
const (
	keepDelivered = 24 * time.Hour
	keepHistory   = 90 * 24 * time.Hour
)

// PassResult says what one RunOnce did.
type PassResult struct {
	// Evaluated counts the rules evaluated; Errors those that failed.
	Evaluated, Errors int
	Transitions       int
	Notifications     int
}

// Interval is the time between two passes: Tick or its default.
func (e *Evaluator) Interval() time.Duration { return e.tick() }

// LeaseFor is how long the role of the passes lasts unless renewed: Lease or its default.
func (e *Evaluator) LeaseFor() time.Duration { return e.lease() }

func (e *Evaluator) tick() time.Duration {
	if e.Tick > 0 {
		return e.Tick
	}
	t := 15 * time.Second
	for _, g := range e.Rules.Groups {
		t = min(t, g.Interval)
	}
	if e.Lease > 0 {
		// Renewed at least twice before it runs out, so one slow pass loses nothing.
		t = min(t, e.Lease/3)
	}
	return t
}

func (e *Evaluator) lease() time.Duration {
	if e.Lease > 0 {
		return e.Lease
	}
	return 3 * e.tick()
}

// Forget forgets when each group was last evaluated, so the next pass evaluates every group:
// what the server calls while another replica evaluates, whose schedule is not this one's.
func (e *Evaluator) Forget() { e.lastEval = nil }

// RunOnce evaluates the groups that are due and saves the pass.
func (e *Evaluator) RunOnce(ctx context.Context) (PassResult, error) {
	var res PassResult
	now := e.Clock.Now()
	current, err := e.Store.AlertInstances(ctx)
	if err != nil {
		return res, fmt.Errorf("load alert state: %w", err)
	}
	byRule := map[string]map[string]*Instance{}
	for i := range current {
		in := current[i]
		if byRule[in.RuleKey] == nil {
			byRule[in.RuleKey] = map[string]*Instance{}
		}
		byRule[in.RuleKey][in.Key] = &in
	}
	if e.lastEval == nil {
		e.lastEval = map[string]time.Time{}
	}
	pass := Pass{Now: now}
	known := map[string]bool{}
	var due []*Group
	for _, g := range e.Rules.Groups {
		for _, r := range g.Rules {
			known[r.Key()] = true
		}
		if last, ok := e.lastEval[g.Name]; ok && now.Sub(last) < g.Interval {
			continue
		}
		e.lastEval[g.Name] = now
		due = append(due, g)
	}
	cache := &evalCache{src: e.Source, counters: map[Window][]Row{}}
	cache.prefetch(ctx, due, now)
	for _, g := range due {
		for _, r := range g.Rules {
			st := e.evalRule(ctx, cache, g, r, now, byRule[r.Key()], &pass)
			pass.Statuses = append(pass.Statuses, st)
			res.Evaluated++
			if st.Health == HealthError {
				res.Errors++
			}
		}
	}
	// Instances of rules that were removed from the file resolve: nobody can judge them.
	for key, ins := range byRule {
		if known[key] {
			continue
		}
		for _, in := range ins {
			e.move(&pass, in, StateInactive, now)
		}
	}
	res.Transitions, res.Notifications = len(pass.History), len(pass.Notifications)
	if err := e.Store.SaveAlertPass(ctx, pass); err != nil {
		return res, fmt.Errorf("save alert state: %w", err)
	}
	if p, ok := e.Store.(Pruner); ok && now.Sub(e.lastPrune) >= time.Hour {
		// Pruning is housekeeping: a failure is logged and tried again next hour.
		e.lastPrune = now
		if err := p.PruneAlerts(ctx, now.Add(-keepDelivered), now.Add(-keepHistory)); err != nil {
			e.logger().Warn("prune alert history", "err", err)
		}
	}
	return res, nil
}

// evalRule evaluates r and moves its instances; it returns the rule's status.
func (e *Evaluator) evalRule(ctx context.Context, cache *evalCache, g *Group, r *Rule, now time.Time, ins map[string]*Instance, pass *Pass) RuleStatus {
	st := RuleStatus{RuleKey: r.Key(), Group: g.Name, Alert: r.Alert, EvaluatedAt: now}
	samples, health, msg, err := evaluate(ctx, cache, r, now)
	if err != nil {
		// An error is not an all-clear: nothing resolves, and firing alerts keep being
		// re-sent so Alertmanager does not time them out.
		st.Health, st.Message = HealthError, err.Error()
		for _, in := range ins {
			if in.State.Active() {
				e.notifyResend(pass, in, now)
			}
		}
		return st
	}
	st.Health, st.Message = health, msg
	seen := map[string]bool{}
	for _, s := range samples {
		if !st.HasValue || s.value > st.Value {
			st.Value, st.HasValue = s.value, true
		}
		labels := map[string]string{"alertname": r.Alert}
		for k, v := range r.Labels {
			labels[k] = v
		}
		for k, v := range s.labels {
			labels[k] = v
		}
		key := Fingerprint(labels)
		in := ins[key]
		if !s.hit {
			if in != nil {
				in.Value = s.value
			}
			continue
		}
		seen[key] = true
		if in == nil {
			in = &Instance{Key: key, RuleKey: r.Key(), Alert: r.Alert, Labels: labels, State: StateInactive, ActiveAt: now, Since: now}
			if ins == nil {
				ins = map[string]*Instance{}
			}
			ins[key] = in
		}
		in.Value, in.LastTrueAt = s.value, now
		in.Annotations = expandAll(r.Annotations, labels, s.value)
		e.holds(pass, r, in, now)
	}
	e.stoppedHolding(pass, r, ins, seen, now)
	return st
}

// TestNotification builds a firing alert that only says the delivery path works; it
// ends on its own after a few minutes.
func (e *Evaluator) TestNotification(actor string) Pass {
	now := e.Clock.Now()
	labels := map[string]string{"alertname": "SettleTestNotification", "severity": "none", "requested_by": actor}
	key := Fingerprint(labels)
	n := Notice{Status: "firing", Labels: labels, StartsAt: now, EndsAt: now.Add(5 * time.Minute),
		GeneratorURL: e.ExternalURL + "/alerts", Fingerprint: key,
		Annotations: map[string]string{"summary": "Test notification from Settle, sent by " + actor,
			"description": "Nothing is wrong: someone checked that alerts reach you. It resolves by itself in 5 minutes."}}
	p := Pass{Now: now}
	for _, r := range e.Receivers {
		p.Notifications = append(p.Notifications, Notification{Receiver: r.Name, InstanceKey: key, Notice: n})
	}
	return p
}

// SendTest writes a test notification to every receiver through the outbox.
func (e *Evaluator) SendTest(ctx context.Context, actor string) (int, error) {
	if len(e.Receivers) == 0 {
		return 0, ErrNoReceiver
	}
	p := e.TestNotification(actor)
	if err := e.Store.SaveAlertPass(ctx, p); err != nil {
		return 0, fmt.Errorf("queue test notification: %w", err)
	}
	return len(p.Notifications), nil
}

// logger is Logger, given when the evaluator is built; without one (a test that calls
// RunOnce) it logs nothing, never to the process's global logger.
func (e *Evaluator) logger() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func expandAll(ann map[string]string, labels map[string]string, value float64) map[string]string {
	out := make(map[string]string, len(ann))
	for k, v := range ann {
		out[k] = expand(k, v, labels, value)
	}
	return out
}

// Fingerprint identifies a label set: the same labels always give the same key.
func Fingerprint(labels map[string]string) string {
	sum := sha256.Sum256([]byte(labelString(labels)))
	return hex.EncodeToString(sum[:8])
}
