package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settle-dev/settle/ops/fake"
)

// maxInFlight caps the intents running at once; beyond it the generator counts an arrival as
// not sent rather than let itself, on the machine it measures, grow without bound.
const maxInFlight = 4000

// routeStats are one route's figures.
type routeStats struct {
	latencies []time.Duration
	classes   map[string]int
}

// The client's record of what it was answered, which the ledger must account for.
type (
	refundRecord struct{ order, payment, opID, status, refundID string }
	chatRecord   struct{ key, opID, completionID string }
	jobRecord    struct{ key, jobID string }
)

// driver offers the traffic and keeps its figures.
type driver struct {
	w      *world
	cfg    config
	client *http.Client

	start, offeredEnd, end time.Time
	killedAt, restartedAt  atomic.Int64 // unix nanoseconds; 0 before
	downUntil              [2]atomic.Int64
	inFlight               atomic.Int64

	mu         sync.Mutex
	routes     map[string]*routeStats
	aroundKill map[string]int
	inWindow   int // requests started within the traffic's duration
	notSent    int
	intents    map[string]int
	refundAns  map[string]int
	refunds    []refundRecord
	chats      []chatRecord
	jobs       []jobRecord
	otherOp    []string // intents answered from more than one operation or job
	events     []string
}

func newDriver(w *world, cfg config) *driver {
	tr := &http.Transport{MaxIdleConns: 2000, MaxIdleConnsPerHost: 1000, IdleConnTimeout: 30 * time.Second}
	return &driver{w: w, cfg: cfg, client: &http.Client{Transport: tr, Timeout: 60 * time.Second},
		routes: map[string]*routeStats{}, aroundKill: map[string]int{}, intents: map[string]int{}, refundAns: map[string]int{}}
}

// drive offers intents as an open-loop Poisson process for the configured duration, kills
// replica2 at its point, and returns once every intent has its answers.
func (d *driver) drive(ctx context.Context) {
	d.start = time.Now()
	end := d.start.Add(d.cfg.duration)
	var wg sync.WaitGroup
	if d.cfg.killAt > 0 {
		wg.Go(func() { d.killReplica(ctx) })
	}
	rnd := rand.New(rand.NewPCG(d.cfg.seed, 1))
	perSecond := d.cfg.rate / requestsPerIntent
	next := d.start
	for n := int64(1); ; n++ {
		next = next.Add(time.Duration(rnd.ExpFloat64() / perSecond * float64(time.Second)))
		if next.After(end) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		kind, seed := pickKind(rnd.Float64()), rnd.Uint64()
		if d.inFlight.Load() >= maxInFlight {
			d.mu.Lock()
			d.notSent++
			d.mu.Unlock()
			continue
		}
		d.inFlight.Add(1)
		wg.Go(func() {
			defer d.inFlight.Add(-1)
			d.intent(ctx, n, kind, rand.New(rand.NewPCG(seed, uint64(n))))
		})
	}
	d.offeredEnd = time.Now()
	wg.Wait()
	d.end = time.Now()
}

func pickKind(x float64) string {
	for _, m := range intentMix {
		if x < m.share {
			return m.kind
		}
		x -= m.share
	}
	return intentMix[0].kind
}

// killReplica kills replica2 at its point of the run and starts it again after
// restartAfter.
func (d *driver) killReplica(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(d.cfg.killAt * float64(d.cfg.duration))):
	}
	d.killedAt.Store(time.Now().UnixNano())
	d.w.killAndRestart(ctx, 1, d.cfg.restartAfter, d.logf)
	d.restartedAt.Store(time.Now().UnixNano())
}

func (d *driver) logf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, fmt.Sprintf("%6.1fs  ", time.Since(d.start).Seconds())+fmt.Sprintf(format, args...))
}

// killWindow is from a second before the kill to two seconds after the restart (or the
// end of the traffic when there is none); zero before the kill.
func (d *driver) killWindow() (from, to time.Time) {
	k := d.killedAt.Load()
	if k == 0 {
		return time.Time{}, time.Time{}
	}
	to = d.start.Add(d.cfg.duration)
	if r := d.restartedAt.Load(); r != 0 && d.cfg.restartAfter > 0 {
		to = time.Unix(0, r).Add(2 * time.Second)
	}
	return time.Unix(0, k).Add(-time.Second), to
}

// intent plays one user intent of kind.
func (d *driver) intent(ctx context.Context, n int64, kind string, rnd *rand.Rand) {
	d.mu.Lock()
	d.intents[kind]++
	d.mu.Unlock()
	switch kind {
	case "refund", "refund-over":
		d.refundIntent(ctx, n, kind == "refund-over", rnd)
	case "chat", "chat-stream":
		d.chatIntent(ctx, n, kind == "chat-stream", rnd)
	case "job":
		d.jobIntent(ctx, n, rnd)
	}
}

// repeat sends c as a user and their client would: once, or twice at once to both replicas
// (a double click); and sometimes once more after the answer, to either replica.
func (d *driver) repeat(ctx context.Context, c call, rnd *rand.Rand) []answer {
	slot := rnd.IntN(2)
	var out []answer
	if rnd.Float64() < doubleClickP {
		var other answer
		var wg sync.WaitGroup
		wg.Go(func() { other = d.send(ctx, c, 1-slot) })
		out = append(out, d.send(ctx, c, slot))
		wg.Wait()
		out = append(out, other)
	} else {
		out = append(out, d.send(ctx, c, slot))
	}
	if rnd.Float64() < retryLaterP {
		sleep(ctx, time.Duration(200+rnd.IntN(1800))*time.Millisecond)
		out = append(out, d.send(ctx, c, rnd.IntN(2)))
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// refundIntent refunds part of a payment made for the intent: 38.00 of 100.00, or, when
// over, 200.00, which Settle must refuse (422 amount_over_remainder). A client calls again
// while the answer is unconfirmed, as the answer says it safely may.
func (d *driver) refundIntent(ctx context.Context, n int64, over bool, rnd *rand.Rand) {
	order, payment := fmt.Sprintf("order-%d", n), fmt.Sprintf("pi_load_%d", n)
	tenant := rnd.IntN(d.cfg.tenants)
	d.w.stripe.AddPaymentIntent(payment, 10000, "usd", fake.OwnedBy(tenantName(tenant)))
	amount := 3800
	if over {
		amount = 20000
	}
	c := call{route: "refund", path: "/api/v1/refunds", tenant: tenant, body: mustJSON(map[string]any{"order_id": order, "amount_cents": amount,
		"currency": "usd", "payment_intent": payment, "request_ref": fmt.Sprintf("load-%d", n)})}
	answers := d.repeat(ctx, c, rnd)
	for i := 0; i < 3 && answers[len(answers)-1].body["status"] == "unconfirmed"; i++ {
		sleep(ctx, time.Second)
		answers = append(answers, d.send(ctx, c, rnd.IntN(2)))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ops := map[string]bool{}
	for _, a := range answers {
		if a.class != class2xx {
			continue
		}
		status, _ := a.body["status"].(string)
		refundID, _ := a.body["refund_id"].(string)
		d.refundAns[status]++
		d.refunds = append(d.refunds, refundRecord{order: order, payment: payment, opID: a.opID, status: status, refundID: refundID})
		ops[a.opID] = true
	}
	if len(ops) > 1 {
		d.otherOp = append(d.otherOp, "refund "+order)
	}
}

// chatIntent asks one question under its own Idempotency-Key, streamed or not; sometimes the
// key is then sent with another question, which Settle must refuse (422).
func (d *driver) chatIntent(ctx context.Context, n int64, stream bool, rnd *rand.Rand) {
	key := fmt.Sprintf("chat-%d-%d", d.cfg.seed, n)
	route := "chat"
	if stream {
		route = "chat-stream"
	}
	msg := func(q string) []byte {
		return mustJSON(map[string]any{"model": "fake-small", "stream": stream,
			"messages": []map[string]string{{"role": "user", "content": q}}})
	}
	c := call{route: route, path: "/v1/chat/completions", key: key, stream: stream, tenant: rnd.IntN(d.cfg.tenants), body: msg(fmt.Sprintf("question %d", n))}
	answers := d.repeat(ctx, c, rnd)
	if rnd.Float64() < keyReuseP {
		c.body = msg(fmt.Sprintf("another question %d", n))
		d.send(ctx, c, rnd.IntN(2))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := map[string]bool{}
	for _, a := range answers {
		if a.class == class2xx {
			d.chats = append(d.chats, chatRecord{key: key, opID: a.opID, completionID: a.id})
			ids[a.id] = true
		}
	}
	if len(ids) > 1 {
		d.otherOp = append(d.otherOp, "chat "+key)
	}
}

// jobDocuments are the documents a fifth of the jobs summarise: the same document, prompt
// version and profile under another key is one computation, answered without a generation.
var jobDocuments = []string{
	"Invoice 4471: two chairs, one table, delivered on Monday; the customer reports a scratch.",
	"Meeting notes: the release moves to Thursday; QA needs the staging database refreshed.",
	"Support ticket: the refund for order 88 arrived twice in the customer's statement view.",
}

// jobIntent submits one pipeline job under its own key; sometimes the key is then sent with
// another document, which Settle must refuse (422).
func (d *driver) jobIntent(ctx context.Context, n int64, rnd *rand.Rand) {
	key := fmt.Sprintf("job-%d-%d", d.cfg.seed, n)
	doc := fmt.Sprintf("Document %d of the load run: a short text for the summariser to read.", n)
	if rnd.IntN(5) == 0 {
		doc = jobDocuments[rnd.IntN(len(jobDocuments))]
	}
	body := func(text string) []byte {
		return mustJSON(map[string]any{"document": map[string]string{"text": text}, "pipeline": "summarise",
			"prompt_version": "v1", "model_profile": "fast", "request_ref": fmt.Sprintf("load-%d", n)})
	}
	c := call{route: "job", path: "/api/v1/jobs", key: key, tenant: rnd.IntN(d.cfg.tenants), body: body(doc)}
	answers := d.repeat(ctx, c, rnd)
	if rnd.Float64() < keyReuseP {
		c.body = body(doc + " (edited)")
		d.send(ctx, c, rnd.IntN(2))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := map[string]bool{}
	for _, a := range answers {
		if a.class == class2xx {
			d.jobs = append(d.jobs, jobRecord{key: key, jobID: a.id})
			ids[a.id] = true
		}
	}
	if len(ids) > 1 {
		d.otherOp = append(d.otherOp, "job "+key)
	}
}
