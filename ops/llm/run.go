package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/settle-dev/settle/ops"
)

// run sends op's request to the provider until the outcome is settled or this request's
// budget is spent, streaming to the client as the provider streams, and answers; lg is the
// ledger of op's policy. Every attempt is begun in the ledger before it is sent and
// finished after. The provider call runs without the client's cancellation: a client that
// leaves does not stop the generation, which is stored for its retry.
func (x *exchange) run(lg *ops.Ledger, op *ops.Operation, first *ops.Attempt) error {
	g := x.g
	bg := context.WithoutCancel(x.ctx)
	deadline := time.Now().Add(g.cfg.Deadline)
	f := g.flights.open(op.ID, x.req.Stream)
	defer g.flights.close(f)
	upBody := x.req.upstreamBody(x.body)
	a := first
	var res ops.AttemptResult
	var reply Reply
	var body []byte
	for n := 1; ; n++ {
		if a == nil {
			cur, att, err := lg.BeginAttempt(bg, op, x.owner)
			if err != nil {
				x.release(lg, op)
				return x.fail(fmt.Errorf("begin attempt: %w", err))
			}
			op, a = cur, att
		}
		if x.possibleDup {
			x.dups++
			g.stats.possibleDups.Add(1)
		}
		g.stats.upstream.Add(1)
		tr := x.track(lg, op)
		asm := newAssembler()
		requestID := ""
		reply = g.cfg.Upstream.Send(bg, Call{Body: upBody, Stream: x.req.Stream, OperationID: op.ID, Attempt: a.N,
			Sent: func() { tr.phase(ops.PhaseSentToProvider) },
			Answered: func(id string) {
				requestID = id
				f.setRequestID(id)
			},
			Event: func(d []byte) error {
				token, usageOnly, err := asm.add(d)
				if err != nil {
					return err
				}
				if token {
					tr.phase(ops.PhaseFirstToken)
				}
				f.add(d)
				x.forward(d, usageOnly, Head{Stream: true, OperationID: op.ID, ProviderRequestID: requestID})
				return nil
			}})
		op = tr.stop()
		res, body = x.result(a, reply, asm)
		res.PossibleDuplicate = x.possibleDup
		if res.Outcome == ops.OutcomeTimeout || res.Outcome == ops.OutcomeKeyInUse {
			g.stats.uncertain.Add(1)
		}
		cur, retry, err := lg.FinishAttempt(bg, op, a, x.owner, res)
		if err != nil {
			return x.fail(fmt.Errorf("finish attempt: %w", err))
		}
		op = cur
		if !retry {
			break
		}
		x.possibleDup = res.Outcome == ops.OutcomeTimeout || res.Outcome == ops.OutcomeKeyInUse
		wait := ops.Backoff(n, res.RetryAfter, lg.Limits, nil)
		// A stream that reached the client cannot be restarted under it: the client's
		// retry continues the operation instead.
		if x.began || n >= lg.Limits.AttemptsPerCall || time.Until(deadline) < wait {
			op = x.release(lg, op)
			break
		}
		if err := g.cfg.Sleep(bg, wait); err != nil {
			op = x.release(lg, op)
			break
		}
		a = nil
	}
	return x.answer(op, res, reply, body)
}

// usageRecord is what an operation stores as its usage: the tokens and cost of the
// generation that answered, and how many sends may have billed twice.
type usageRecord struct {
	Usage
	Model             string `json:"model"`
	CostMicros        int64  `json:"cost_micros"`
	CostKnown         bool   `json:"cost_known"`
	Currency          string `json:"currency,omitempty"`
	ProviderRequestID string `json:"provider_request_id,omitempty"`
	Attempt           int    `json:"attempt"`
	// PossibleDuplicates counts sends of this operation in this request that followed an
	// attempt whose outcome was uncertain.
	PossibleDuplicates int `json:"possible_duplicates"`
}

// result turns the provider's reply into what the ledger records. An answer that is not a
// completion is uncertain: the provider may have billed it.
func (x *exchange) result(a *ops.Attempt, reply Reply, asm *assembler) (ops.AttemptResult, []byte) {
	r := ops.AttemptResult{Outcome: reply.Outcome, HTTPStatus: reply.HTTPStatus, ProviderRequestID: reply.RequestID,
		ErrorCode: reply.ErrorCode, RetryAfter: reply.RetryAfter}
	if reply.Outcome != ops.OutcomeOK {
		return r, nil
	}
	var c *completion
	var body []byte
	var err error
	if x.req.Stream {
		if asm.c.ID == "" {
			err = fmt.Errorf("stream without chunks")
		} else {
			c = asm.completion()
			body, err = json.Marshal(c)
		}
	} else if c, err = parseCompletion(reply.Body); err == nil {
		body = reply.Body
	}
	if err != nil {
		r.Outcome, r.ErrorCode = ops.OutcomeTimeout, "upstream_bad_response"
		return r, nil
	}
	u, _ := parseUsage(c.Usage)
	model := c.Model
	if model == "" {
		model = x.req.Model
	}
	rec := usageRecord{Usage: u, Model: model, ProviderRequestID: reply.RequestID, Attempt: a.N, PossibleDuplicates: x.dups}
	rec.CostMicros, rec.CostKnown = x.g.cfg.Prices.Cost(model, u)
	if rec.CostKnown {
		rec.Currency = x.g.cfg.Prices.Currency
	}
	usage, _ := json.Marshal(rec)
	r.Usage = usage
	if rec.CostKnown {
		cost := rec.CostMicros
		r.CostMicros = &cost
	}
	r.Result = &ops.Result{ProviderRef: c.ID, ProviderRequestID: reply.RequestID, Body: body, Usage: usage, CostMicros: rec.CostMicros}
	return r, body
}

// answer ends the request that ran the operation.
func (x *exchange) answer(op *ops.Operation, res ops.AttemptResult, reply Reply, body []byte) error {
	if op.Status == ops.StatusSucceeded {
		if x.req.Stream {
			if !x.began {
				return x.replay(op, "")
			}
			x.write(doneEvent)
			return nil
		}
		if err := x.out.Begin(Head{OperationID: op.ID, ProviderRequestID: op.ProviderRequestID, Length: len(body)}); err != nil {
			return nil // the client left; the completion is stored for its retry
		}
		x.began = true
		x.write(body)
		return nil
	}
	return x.fail(failure(op, res, reply))
}

// fail answers an error: returned while nothing was sent, written into the stream after.
func (x *exchange) fail(err error) error {
	if x.began {
		return x.streamFailed(err)
	}
	return err
}

// failure explains to the client why its request ended without a completion.
func failure(op *ops.Operation, res ops.AttemptResult, reply Reply) error {
	next := fmt.Sprintf(" Retrying with the same key goes on with operation %s.", op.ID)
	if op.Status == ops.StatusUnknown || op.Status == ops.StatusExpired {
		next = fmt.Sprintf(" The provider may have billed it, so nothing more is sent for this key until a person or the reconciler settles operation %s.", op.ID)
	}
	p := &Problem{UpstreamStatus: reply.HTTPStatus}
	e := &ops.Error{Code: ops.EUNAVAILABLE, Err: p}
	switch {
	case res.Outcome == ops.OutcomeInvalid && res.ErrorCode == "upstream_auth":
		e.Reason, e.Message = ReasonUpstreamAuth, "The provider refused the gateway's credentials; nothing was billed."
	case res.Outcome == ops.OutcomeInvalid:
		e.Code, e.Reason = ops.EINVALID, ReasonRefused
		e.Message = "The provider refused the request: " + reply.Message
	case res.Outcome == ops.OutcomeRateLimited:
		p.RetryAfter = max(res.RetryAfter, time.Second)
		e.Reason, e.Message = ReasonRateLimited, "The provider is limiting requests; nothing was billed."+next
	case res.Outcome == ops.OutcomeNotSent:
		e.Reason, e.Message = ReasonUnreachable, "The provider could not be reached; nothing was sent."+next
	case res.ErrorCode == "upstream_bad_response":
		e.Reason, e.Message = ReasonBadResponse, "The provider's answer was not a chat completion."+next
	case res.ErrorCode == "upstream_timeout":
		e.Reason, e.Message = ReasonTimeout, "The provider did not finish its answer in time."+next
	case res.ErrorCode == "stream_broken":
		e.Reason, e.Message = ReasonUpstreamError, "The provider's stream broke off before it ended."+next
	default:
		e.Reason, e.Message = ReasonUpstreamError, "The provider failed to answer."+next
	}
	return e
}

// release gives up this request's lease so the client's retry may go on at once.
func (x *exchange) release(lg *ops.Ledger, op *ops.Operation) *ops.Operation {
	if op.Status != ops.StatusInProgress || op.LeaseOwner != x.owner {
		return op
	}
	out, err := lg.Release(context.WithoutCancel(x.ctx), op, x.owner, 0, "")
	if err != nil {
		x.g.cfg.Logger.Warn("llm: release lease", "operation", op.ID, "err", err)
		return op
	}
	return out
}

// tracker records the phases of one attempt (sent_to_provider, first_token) and keeps its
// lease alive while a long generation runs. It writes from timers, so the stream to the
// client never waits for the database and a short call starts no goroutine; it owns the
// operation's version until stop hands it back. A phase is written once it has lasted
// Config.PhaseDelay: a call that ends sooner records no intermediate phase, and of two
// phases reached within the delay only the later is written.
type tracker struct {
	lg    *ops.Ledger
	ctx   context.Context
	delay time.Duration
	every time.Duration
	owner string
	log   func(msg string, args ...any)

	writing sync.Mutex // held by a write, so writes land in order and stop waits for one

	mu           sync.Mutex
	op           *ops.Operation
	cur, pending ops.Phase
	flush, renew *time.Timer
	stopped      bool
}

var phaseRank = map[ops.Phase]int{ops.PhaseSending: 1, ops.PhaseSentToProvider: 2, ops.PhaseFirstToken: 3}

func (x *exchange) track(lg *ops.Ledger, op *ops.Operation) *tracker {
	t := &tracker{lg: lg, ctx: context.WithoutCancel(x.ctx), owner: x.owner, delay: max(x.g.cfg.PhaseDelay, 0),
		every: lg.Limits.Lease / 3, log: x.g.cfg.Logger.Warn, op: op, cur: ops.PhaseSending}
	if t.every <= 0 {
		t.every = 10 * time.Second
	}
	t.renew = time.AfterFunc(t.every, t.renewLease)
	return t
}

// phase asks for op's phase to move forward; each phase is written once.
func (t *tracker) phase(p ops.Phase) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || phaseRank[p] <= phaseRank[t.cur] || phaseRank[p] <= phaseRank[t.pending] {
		return
	}
	t.pending = p
	if t.flush == nil {
		t.flush = time.AfterFunc(t.delay, t.flushPhase)
	}
}

// flushPhase writes the phase that has lasted the delay.
func (t *tracker) flushPhase() {
	t.writing.Lock()
	defer t.writing.Unlock()
	t.mu.Lock()
	p, stopped := t.pending, t.stopped
	t.pending, t.flush = ops.PhaseNone, nil
	t.mu.Unlock()
	if !stopped && p != ops.PhaseNone {
		t.write(p)
	}
}

// renewLease extends the lease, writing a pending phase with it, and comes back later.
func (t *tracker) renewLease() {
	t.writing.Lock()
	defer t.writing.Unlock()
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	p := t.cur
	if t.pending != ops.PhaseNone {
		p, t.pending = t.pending, ops.PhaseNone
		if t.flush != nil {
			t.flush.Stop()
			t.flush = nil
		}
	}
	t.mu.Unlock()
	t.write(p)
	t.mu.Lock()
	if !t.stopped {
		t.renew.Reset(t.every)
	}
	t.mu.Unlock()
}

// write moves the phase and extends the lease in one compare-and-set; the caller holds
// t.writing.
func (t *tracker) write(p ops.Phase) {
	t.mu.Lock()
	op := t.op
	t.mu.Unlock()
	now := t.lg.Clock.Now()
	out, err := t.lg.Store.SetPhase(t.ctx, op.ID, t.owner, p, now.Add(t.lg.Limits.Lease), now)
	if err != nil {
		t.log("llm: record phase", "operation", op.ID, "phase", p, "err", err)
		return
	}
	t.mu.Lock()
	t.op, t.cur = out, p
	t.mu.Unlock()
}

// stop ends the tracking, waits for a write under way, and returns the operation as last
// written.
func (t *tracker) stop() *ops.Operation {
	t.mu.Lock()
	t.stopped = true
	if t.flush != nil {
		t.flush.Stop()
	}
	t.renew.Stop()
	t.mu.Unlock()
	t.writing.Lock()
	defer t.writing.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.op
}

// hub holds the generations this process is running, so a request waiting on the same
// key (Prefer: wait) can follow one live, from its first chunk.
type hub struct {
	mu      sync.Mutex
	flights map[string]*flight
}

func newHub() *hub { return &hub{flights: map[string]*flight{}} }

// flight is one running generation as its waiters see it.
type flight struct {
	opID   string
	stream bool
	done   chan struct{}

	mu      sync.Mutex
	events  [][]byte
	changed chan struct{}
	reqID   string
}

func (h *hub) open(opID string, stream bool) *flight {
	f := &flight{opID: opID, stream: stream, done: make(chan struct{}), changed: make(chan struct{})}
	h.mu.Lock()
	h.flights[opID] = f
	h.mu.Unlock()
	return f
}

func (h *hub) get(opID string) *flight {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.flights[opID]
}

// close ends a flight: its waiters wake and read the outcome from the store.
func (h *hub) close(f *flight) {
	h.mu.Lock()
	if h.flights[f.opID] == f {
		delete(h.flights, f.opID)
	}
	h.mu.Unlock()
	f.mu.Lock()
	select {
	case <-f.done:
	default:
		close(f.done)
		close(f.changed)
	}
	f.mu.Unlock()
}

func (f *flight) add(data []byte) {
	f.mu.Lock()
	f.events = append(f.events, append([]byte(nil), data...))
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *flight) setRequestID(id string) {
	f.mu.Lock()
	f.reqID = id
	f.mu.Unlock()
}

func (f *flight) requestID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqID
}

// since returns the events from index i on, whether the flight ended, and a channel closed
// at the next change.
func (f *flight) since(i int) ([][]byte, bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var evs [][]byte
	if i < len(f.events) {
		evs = f.events[i:len(f.events):len(f.events)]
	}
	select {
	case <-f.done:
		return evs, true, f.changed
	default:
		return evs, false, f.changed
	}
}
