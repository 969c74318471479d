package alertstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/alerts/alertstest"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg/alertstore"
)

// unknownRule fires as soon as any operation's outcome is unknown and resolves at once.
const unknownRule = `
groups:
  - name: test
    interval: 1m
    rules:
      - alert: UnknownBacklog
        expr: {count: unknown_operations, above: 0, by: [tenant, kind]}
        labels: {severity: page}
        annotations:
          summary: "{{ $value }} unknown {{ $labels.kind }} operations for {{ $labels.tenant }}"
`

// dispatcher puts the alert dispatcher behind the relay, as cmd/settle does.
type dispatcher struct{ d *alerts.Dispatcher }

func (p dispatcher) Publish(ctx context.Context, e outbox.Event) error {
	return p.d.Deliver(ctx, e.Topic, e.EventID, e.Payload)
}

// alertRig is an evaluator and a relay over a real database, as 'settle serve' wires them.
type alertRig struct {
	f     *fixture
	ev    *alerts.Evaluator
	relay *outbox.Relay
}

func newAlertRig(t *testing.T, f *fixture, rules string, rs []alerts.Receiver) *alertRig {
	t.Helper()
	set, err := alerts.Parse("test.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	return &alertRig{f: f,
		ev: &alerts.Evaluator{Rules: set, Source: f.alerts, Store: f.alerts, Clock: f.Clock,
			Receivers: alerts.Infos(rs), ExternalURL: "http://settle.test"},
		relay: &outbox.Relay{Store: alertstore.Outbox{DB: f.DB}, Publisher: dispatcher{&alerts.Dispatcher{Receivers: rs}}, Clock: f.Clock},
	}
}

func (r *alertRig) evaluate(t *testing.T) alerts.PassResult {
	t.Helper()
	res, err := r.ev.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (r *alertRig) deliver(t *testing.T) int {
	t.Helper()
	n, err := r.relay.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// closeOp settles an operation the short way; the ledger's close path is tested elsewhere.
func (f *fixture) closeOp(t *testing.T, id string) {
	t.Helper()
	if _, err := f.DB.Pool.Exec(context.Background(),
		`UPDATE operations SET status = 'failed', closed_at = $2, version = version + 1 WHERE id = $1`, id, f.Clock.Now()); err != nil {
		t.Fatal(err)
	}
}

type amAlert struct {
	Labels   map[string]string `json:"labels"`
	EndsAt   time.Time         `json:"endsAt"`
	StartsAt time.Time         `json:"startsAt"`
	Status   struct {
		State string `json:"state"`
	} `json:"status"`
	Annotations map[string]string `json:"annotations"`
}

func amAlerts(t *testing.T, base, alertname string) []amAlert {
	t.Helper()
	resp, err := http.Get(base + "/api/v2/alerts?filter=" + url.QueryEscape(fmt.Sprintf("alertname=%q", alertname)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("alertmanager answered %s: %s", resp.Status, body)
	}
	var out []amAlert
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return out
}

func TestAlertsReachARealAlertmanager(t *testing.T) {
	t.Parallel()
	am := alertstest.Alertmanager(t)
	f := newFixture(t)
	// Alertmanager judges startsAt and endsAt by its own clock, so ours runs a minute behind
	// the real time and catches up for the resolve.
	f.Clock.Set(time.Now().Add(-time.Minute))
	rig := newAlertRig(t, f, strings.Replace(unknownRule, "interval: 1m", "interval: 10s", 1),
		alerts.Receivers(am, nil, nil, "http://settle.test"))

	op := f.ToUnknown(t, "am-1")
	if res := rig.evaluate(t); res.Transitions != 1 || res.Notifications != 1 {
		t.Fatalf("pass %+v, want one transition to firing and one notification", res)
	}
	if n := rig.deliver(t); n != 1 {
		t.Fatalf("delivered %d, want 1", n)
	}
	got := amAlerts(t, am, "UnknownBacklog")
	if len(got) != 1 {
		t.Fatalf("alertmanager holds %+v, want one alert", got)
	}
	a := got[0]
	if a.Labels["tenant"] != "acme" || a.Labels["kind"] != "refund" || a.Labels["severity"] != "page" || a.Status.State != "active" {
		t.Fatalf("alert %+v", a)
	}
	if a.Annotations["summary"] != "1 unknown refund operations for acme" || !a.EndsAt.After(time.Now()) {
		t.Fatalf("alert %+v", a)
	}

	// Firing alerts are re-sent every evaluation, as Prometheus does.
	f.Clock.Advance(30 * time.Second)
	rig.evaluate(t)
	if n := rig.deliver(t); n != 1 {
		t.Fatalf("re-sent %d, want 1", n)
	}

	f.closeOp(t, op.ID)
	f.Clock.Set(time.Now())
	if res := rig.evaluate(t); res.Transitions != 1 {
		t.Fatalf("pass %+v, want the resolve", res)
	}
	if n := rig.deliver(t); n != 1 {
		t.Fatalf("delivered %d, want the resolve", n)
	}
	// Alertmanager drops resolved alerts from its list, or shows them ended.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = amAlerts(t, am, "UnknownBacklog")
		if len(got) == 0 || (got[0].Status.State != "active" && !got[0].EndsAt.After(time.Now())) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still firing in alertmanager after the resolve: %+v", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := f.Count(t, `SELECT count(*) FROM alert_history`); n != 2 {
		t.Fatalf("%d history rows, want firing and resolved", n)
	}
}

// flakyWebhook fails its first failures requests, then records what it gets.
type flakyWebhook struct {
	mu       sync.Mutex
	failures int
	calls    int
	got      []alerts.WebhookPayload
	ids      []string
}

func (w *flakyWebhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if w.calls <= w.failures {
		http.Error(rw, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	var p alerts.WebhookPayload
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	w.got = append(w.got, p)
	w.ids = append(w.ids, r.Header.Get("Settle-Event-Id"))
}

func TestWebhookThatFailsTwiceStillGetsTheNotification(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hook := &flakyWebhook{failures: 2}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	rs := alerts.Receivers("", []string{srv.URL}, nil, "http://settle.test")
	rig := newAlertRig(t, f, unknownRule, rs)

	f.ToUnknown(t, "wh-1")
	rig.evaluate(t)
	for i := 1; i <= 2; i++ {
		if n := rig.deliver(t); n != 0 {
			t.Fatalf("delivery %d counted as done while the receiver fails", i)
		}
		// A restart between attempts loses nothing: the row waits in the table.
		rig = newAlertRig(t, f, unknownRule, rs)
		if n := rig.deliver(t); n != 0 {
			t.Fatalf("retried before the backoff")
		}
		f.Clock.Advance(time.Duration(1<<i)*time.Second + time.Millisecond)
	}
	if n := rig.deliver(t); n != 1 {
		t.Fatalf("delivered %d after the receiver recovered, want 1", n)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if hook.calls != 3 || len(hook.got) != 1 {
		t.Fatalf("%d calls, %d payloads; want 3 calls and the notification once", hook.calls, len(hook.got))
	}
	p := hook.got[0]
	if p.Version != "4" || p.Status != "firing" || len(p.Alerts) != 1 || p.Alerts[0].Labels["alertname"] != "UnknownBacklog" ||
		p.Alerts[0].Labels["tenant"] != "acme" || p.Receiver != rs[0].Name || hook.ids[0] == "" {
		t.Fatalf("payload %+v", p)
	}
	if n := f.Count(t, `SELECT count(*) FROM alert_outbox WHERE published_at IS NULL`); n != 0 {
		t.Fatalf("%d notifications left undelivered", n)
	}
}

// recorder is a receiver that records notices, and fails while down is set.
type recorder struct {
	mu   sync.Mutex
	down bool
	got  []alerts.Notice
}

func (r *recorder) Notify(_ context.Context, _ string, n alerts.Notice) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return fmt.Errorf("down")
	}
	r.got = append(r.got, n)
	return nil
}

func TestAlertOutboxKeepsOrderAndDropsStaleResends(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.Clock.Set(t0)
	rec := &recorder{down: true}
	rs := []alerts.Receiver{{ReceiverInfo: alerts.ReceiverInfo{Name: "am", EveryEvaluation: true}, Notifier: rec}}
	rig := newAlertRig(t, f, unknownRule, rs)
	op := f.ToUnknown(t, "ord-1")
	// Fires, is re-sent three times while the receiver is down, then resolves.
	for range 4 {
		rig.evaluate(t)
		rig.deliver(t)
		f.Clock.Advance(time.Minute)
	}
	f.closeOp(t, op.ID)
	rig.evaluate(t)
	rec.mu.Lock()
	rec.down = false
	rec.mu.Unlock()
	for range 5 {
		f.Clock.Advance(10 * time.Minute)
		rig.deliver(t)
	}
	var states []string
	for _, n := range rec.got {
		states = append(states, n.Status)
	}
	// The first firing (retried), no stale resends, then the resolve: never out of order.
	if fmt.Sprint(states) != "[firing resolved]" {
		t.Fatalf("delivered %v, want [firing resolved]", states)
	}
}

func TestAlertStoreKeepsStateStatusAndHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rig := newAlertRig(t, f, unknownRule, nil)
	rig.evaluate(t)
	st, err := f.alerts.AlertRuleStatuses(ctx)
	if err != nil || len(st) != 1 || st[0].Health != alerts.HealthOK || st[0].HasValue {
		t.Fatalf("statuses %+v %v, want ok with no label set", st, err)
	}
	f.ToUnknown(t, "st-1")
	f.Clock.Advance(time.Hour)
	rig.evaluate(t)
	ins, err := f.alerts.AlertInstances(ctx)
	if err != nil || len(ins) != 1 {
		t.Fatalf("instances %+v %v", ins, err)
	}
	in := ins[0]
	if in.State != alerts.StateFiring || in.Value != 1 || !in.FiredAt.Equal(f.Clock.Now()) || in.Labels["tenant"] != "acme" {
		t.Fatalf("instance %+v", in)
	}
	hist, err := f.alerts.AlertHistory(ctx, 10)
	if err != nil || len(hist) != 1 || hist[0].From != alerts.StateInactive || hist[0].To != alerts.StateFiring {
		t.Fatalf("history %+v %v", hist, err)
	}
	back, err := f.alerts.Backlog(ctx, f.Clock.Now())
	if err != nil || len(back) != 1 || back[0].Values[alerts.UnknownOperations] != 1 || back[0].Values[alerts.OldestUnknown] != 3600 {
		t.Fatalf("backlog %+v %v, want one unknown an hour old", back, err)
	}
}

func TestAlertSourcesCountRecordedRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	from := f.Clock.Now()
	f.ToUnknown(t, "c-1")
	o, err := f.Seed().Open(ctx, f.Refund("c-2", 100), "req-2", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeTimeout}); err != nil {
		t.Fatal(err)
	}
	to := f.Clock.Now().Add(time.Second)
	rows, err := f.alerts.Counters(ctx, from, to)
	if err != nil || len(rows) != 1 {
		t.Fatalf("counters %+v %v", rows, err)
	}
	v := rows[0].Values
	if rows[0].Tenant != "acme" || v[alerts.Attempts] != 2 || v[alerts.Timeouts] != 1 || v[alerts.Operations] != 2 {
		t.Fatalf("counters %+v", rows[0])
	}
	tallies, err := f.alerts.Tally(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	byOutcome := map[string]float64{}
	created := 0.0
	for _, tl := range tallies {
		switch tl.Metric {
		case alerts.MetricAttempts:
			byOutcome[tl.Labels["outcome"]] += tl.N
		case alerts.MetricOperationsCreated:
			created += tl.N
		}
	}
	if byOutcome["timeout"] != 1 || byOutcome["server_error"] != 1 || created != 2 {
		t.Fatalf("tallies %+v", tallies)
	}
}
