package llm

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/reqlog"
)

// Answers before their close.
//
// The close of a call (the operation's status, the attempt's answer, the charge, the audit
// row and the client request's answer, in one statement and one commit) is the heaviest
// write of a call. A client whose call the provider answered with a whole success does not
// wait for it: it gets the answer as soon as the gateway has it, the JSON answer whole or
// the stream's final event, and the close is written after, in the goroutine of the
// ledger's run, while the request's handler has returned and its connection carries the
// client's next request.
//
// Nothing the early answer says goes beyond what the provider said (ops rule 12): it is the
// provider's answer with the operation's id and the provider's request id, as a late answer
// is, and no header says the operation is recorded. Until the close is written the
// operation is in progress under this process's lease, the attempt sent and unfinished, and
// the in-process flight stays open: a retry with the key is told it is in flight, or with
// Prefer: wait gets the answer replayed once it is recorded (ops rules 2, 3). A close that
// is never written (the database is down, the process dies, or it stalls past its lease
// and another process takes the operation over, when the close's compare-and-set is
// refused) leaves the operation as a crash does, settled by the existing recovery: once the
// lease runs out, the client's retry or the reconciler looks the call up at the provider,
// or the reaper takes it (ops rules 6, 9, 11). Drain waits for the closes still pending at
// shutdown.
//
// Everything else is answered after the run, as before: failures and uncertain outcomes
// (what the client is told depends on what was recorded), an answer found by a lookup, a
// stream that relayed nothing yet (it is replayed from the record), background responses,
// whose client is answered as the provider creates them (answerNow), and every answer of
// the Responses API, whose output items the client may name in its next call and which
// must be kept by then (checkItemRefs).

// runEnd is how the ledger's run of a request ended; panicked holds what it panicked with.
type runEnd struct {
	op       *ops.Operation
	err      error
	panicked any
	stack    []byte
}

// runDetached runs the ledger's run of op with send in a goroutine of its own and waits for
// it to end, or for the client to have had its whole answer (answerEarly), when it returns
// nil and the run goes on without the request. The flight f stays open until the run
// ends, so that a retry in this process waits for the close rather than reading the
// operation before it. The run ends hold, the new call's budget hold, once its close wrote
// what the call cost (Hold.Ended): the client may have had its answer long before.
func (x *exchange) runDetached(op *ops.Operation, f *flight, send ops.Sender, spec ops.RunSpec, hold *Hold) *runEnd {
	g := x.g
	// The request's context is cancelled, and its log fields read by the edge, once its
	// handler returns: the run keeps the context's values without its cancellation and sets
	// fields on a copy of its own.
	ctx := reqlog.Detach(context.WithoutCancel(x.ctx))
	x.early = make(chan struct{})
	ended := make(chan runEnd, 1)
	g.runs.add()
	go func() {
		defer g.runs.done()
		defer g.flights.close(f)
		end := runLedger(ctx, g.cfg.Ledger, op, send, spec)
		hold.Ended(end.op)
		if x.answered {
			g.stats.pendingCloses.Add(-1)
			g.closedAfterAnswer(ctx, op.ID, end)
			return
		}
		ended <- end
	}()
	select {
	case <-x.early:
		return nil
	case end := <-ended:
		return &end
	}
}

// runLedger is Ledger.Run, with a panic caught so that the request's goroutine, or the log
// when the client was answered, gets it instead of the whole process.
func runLedger(ctx context.Context, l *ops.Ledger, op *ops.Operation, send ops.Sender, spec ops.RunSpec) (end runEnd) {
	defer func() {
		if p := recover(); p != nil {
			end.panicked, end.stack = p, debug.Stack()
		}
	}()
	end.op, end.err = l.Run(ctx, op, send, spec)
	return end
}

// answerEarly gives the client its whole answer at once when attempt's result res is a
// definite success that the operation will store, and releases the request (x.early). It
// runs in the ledger's run, before the attempt's close. The flight f says its client was
// answered before the release: the client may repeat the key the moment it has the answer,
// and the repeat waits for the close only if it finds f so marked (afterEarlyAnswer).
func (x *exchange) answerEarly(op *ops.Operation, a *ops.Attempt, res ops.AttemptResult, reply Reply, body []byte, f *flight) {
	if x.answered || res.Outcome != ops.OutcomeOK || res.Result == nil || isBackground(x.req) || x.api.route() == responsesRoute {
		// A Responses answer names output items its client may hand back by id in its next
		// call, and the gateway takes such an id only from an answer it keeps
		// (checkItemRefs): the client has the answer once its close has kept it.
		return
	}
	if x.req.Stream {
		if !x.began {
			return // nothing was relayed: the stream is replayed from the record, after the close
		}
		x.end(x.api.done())
	} else {
		if x.began {
			return
		}
		// The provider's request id is the reply's: the close records the same.
		if err := x.out.Begin(Head{OperationID: op.ID, ProviderRequestID: reply.RequestID, Length: len(body)}); err == nil {
			x.began = true
			x.write(body)
		}
	}
	x.answered = true
	f.answered.Store(true)
	x.g.stats.pendingCloses.Add(1)
	close(x.early)
}

// closedAfterAnswer logs a run whose client had its answer and that did not end with the
// operation closed succeeded. Nothing is lost: the operation stays open with its attempt
// sent until its lease runs out, and the lookup, the client's retry or the reaper settles
// it.
func (g *Gateway) closedAfterAnswer(ctx context.Context, opID string, end runEnd) {
	switch {
	case end.panicked != nil:
		g.cfg.Logger.ErrorContext(ctx, "the close of an answered LLM call panicked; the operation stays open until its lease runs out",
			"operation", opID, "panic", fmt.Sprint(end.panicked), "stack", string(end.stack))
	case end.err != nil:
		g.cfg.Logger.WarnContext(ctx, "the close of an answered LLM call was not written; the operation stays open until its lease runs out and a lookup or the reaper settles it",
			"operation", opID, "err", end.err)
	case end.op != nil && end.op.Status != ops.StatusSucceeded:
		g.cfg.Logger.WarnContext(ctx, "an LLM call answered from its provider's success was recorded otherwise",
			"operation", opID, "status", end.op.Status)
	}
}

// Drain waits until the ledger runs of this gateway's requests have ended, the closes
// written after their clients had their answers among them, or ctx is done. Shutdown calls
// it once the server serves no more requests and before the database closes.
func (g *Gateway) Drain(ctx context.Context) error {
	idle := g.runs.idle()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("LLM calls still closing: %w", ctx.Err())
	}
}

// pending counts work in progress and tells when none is left.
type pending struct {
	mu sync.Mutex
	n  int
	// none is closed when n falls to zero; made again when it rises from zero.
	none chan struct{}
}

func (p *pending) add() {
	p.mu.Lock()
	if p.n == 0 {
		p.none = make(chan struct{})
	}
	p.n++
	p.mu.Unlock()
}

func (p *pending) done() {
	p.mu.Lock()
	p.n--
	if p.n == 0 {
		close(p.none)
	}
	p.mu.Unlock()
}

// idle returns a channel closed once nothing is pending, nil when nothing is now.
func (p *pending) idle() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 {
		return nil
	}
	return p.none
}
