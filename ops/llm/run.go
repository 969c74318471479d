package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/reqlog"
)

// run sends op's request to the provider through the ledger's attempt loop until the
// outcome is settled or this request's budget is spent, streaming to the client as the
// provider streams, and answers. The provider call runs without the client's
// cancellation: a client that leaves does not stop the generation, which is stored for its
// retry.
func (x *exchange) run(op *ops.Operation, first *ops.Attempt) error {
	g := x.g
	f := g.flights.open(op.ID, x.req.Stream)
	upBody := x.withCap(op, x.api.upstreamBody(x.req, x.body))
	var res ops.AttemptResult
	var reply Reply
	var body []byte
	var lookedUp bool
	hold := x.budgetHold
	x.budgetHold = nil
	send := ops.SenderFunc(func(ctx context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		var asm streamAssembler
		var whole func() bool
		if x.req.Stream {
			asm = x.api.assembler()
			whole = asm.whole
		}
		requestID, named, n := "", false, 0
		reply = x.up.Send(ctx, Call{Path: x.api.path(), Header: x.req.headers, Body: upBody, Stream: x.req.Stream, OperationID: op.ID, TenantID: op.TenantID, Attempt: a.N,
			Whole: whole,
			Sent:  func() { ops.ReportPhase(ctx, ops.PhaseSentToProvider) },
			Answered: func(id string) {
				requestID = id
				f.setRequestID(id)
			},
			Event: func(d []byte, more bool) error {
				token, usageOnly, err := asm.add(d)
				if err != nil {
					return err
				}
				if !named {
					named = x.recordRef(op, a, asm.id())
				}
				if token {
					ops.ReportPhase(ctx, ops.PhaseFirstToken)
				}
				n++
				ev := streamEvent{attempt: a.N, n: n, data: d}
				f.add(ev)
				x.forward(ev, usageOnly, Head{Stream: true, OperationID: op.ID, ProviderRequestID: requestID}, more)
				return nil
			}})
		res, body = x.result(a, reply, asm)
		if first != nil && a.ID == first.ID && res.Outcome == ops.OutcomeOK && res.CostMicros != nil {
			// The new call's first send is all it sent, and its answer says what it cost.
			hold.Spent(*res.CostMicros)
		}
		if res.Result != nil && x.req.Stream {
			// Stored with the answer, for a replay to send the same events again.
			res.Result.Events = f.recorded(a.N)
		}
		// The ledger sets it too, on its own copy of the request's fields (runDetached).
		reqlog.Set(x.ctx, reqlog.ProviderRequestID, reply.RequestID)
		x.answerEarly(op, a, res, reply, body, f)
		// An event held for one that never came (the stream ended, or broke) goes now, before
		// the close is written; a stream answered early sent it with its closing event.
		x.release()
		return res
	})
	end := x.runDetached(op, f, send, ops.RunSpec{
		Owner: x.owner, First: first, Deadline: time.Now().Add(g.cfg.Deadline),
		PossibleDuplicate: x.possibleDup, PhaseDelay: g.cfg.PhaseDelay, Sleep: g.cfg.Sleep,
		Hooks: x.hooks(first, &lookedUp)}, hold)
	if end == nil {
		return nil // answered early: the close is written without this request
	}
	if end.panicked != nil {
		panic(end.panicked)
	}
	op, err := end.op, end.err
	if err != nil {
		return x.fail(err)
	}
	if lookedUp && op.Status == ops.StatusSucceeded {
		// The answer is the one the provider generated for an earlier attempt: the client
		// gets it as any replay, as JSON or as the events of its stream.
		return x.replay(op, "")
	}
	return x.answer(op, res, reply, body)
}

// hooks are the ledger's hooks of this request's attempts: they count sends and possible
// duplicates, look an uncertain attempt up before anything is sent again, setting
// *lookedUp when what they found settled the operation, and hold every send but first (the
// new operation's, checked at admission) to the tenant's budget.
func (x *exchange) hooks(first *ops.Attempt, lookedUp *bool) ops.Hooks {
	g := x.g
	return ops.Hooks{
		LookFirst: x.lookFirst(lookedUp),
		BeforeSend: func(ctx context.Context, _ *ops.Operation, a *ops.Attempt, possibleDup bool) error {
			if err := x.budgetBeforeSend(ctx, first, a); err != nil {
				return err
			}
			if possibleDup {
				x.dups++
				g.stats.possibleDups.Add(1)
			}
			g.stats.upstream.Add(1)
			x.sent = true
			return nil
		},
		AfterAttempt: func(_ context.Context, _ *ops.Operation, r ops.AttemptResult) error {
			if r.Outcome.Uncertain() {
				g.stats.uncertain.Add(1)
			}
			return nil
		},
		// A stream that reached the client cannot be restarted under it: the client's
		// retry continues the operation instead.
		MayRetry: func() bool { return !x.began },
	}
}

// recordRef records ref, the provider's id of attempt a's answer, on the attempt before the
// stream goes on, so that the attempt can be looked up by it whatever happens next. It
// reports whether there was an id to record. Where the provider keeps nothing to look up
// (Anthropic's messages), the id only helps a person find the call in the provider's
// console, so the stream does not wait for its commit to reach the disk.
func (x *exchange) recordRef(op *ops.Operation, a *ops.Attempt, ref string) bool {
	if ref == "" {
		return false
	}
	if refs := x.g.cfg.Refs; refs != nil {
		durable := x.api.words().kept != ""
		if err := refs.RecordAttemptRef(context.WithoutCancel(x.ctx), op.ID, a.N, ref, durable); err != nil {
			x.g.cfg.Logger.WarnContext(x.ctx, "record the provider's id of an attempt", "operation", op.ID, "attempt", a.N, "ref", ref, "err", err)
		}
	}
	return true
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

// result turns the provider's reply into what the ledger records. An answer that is not
// one of the API's is uncertain: the provider may have billed it.
func (x *exchange) result(a *ops.Attempt, reply Reply, asm streamAssembler) (ops.AttemptResult, []byte) {
	r := ops.AttemptResult{Outcome: reply.Outcome, HTTPStatus: reply.HTTPStatus, ProviderRequestID: reply.RequestID,
		ErrorCode: reply.ErrorCode, RetryAfter: reply.RetryAfter}
	if reply.Outcome != ops.OutcomeOK {
		return r, nil
	}
	var ans answer
	var err error
	if x.req.Stream {
		ans, err = asm.answer()
	} else {
		ans, err = x.api.parseAnswer(reply.Body)
	}
	if err != nil {
		r.Outcome, r.ErrorCode = ops.OutcomeTimeout, "upstream_bad_response"
		return r, nil
	}
	u, body := ans.usage, ans.body
	model := ans.model
	if model == "" {
		model = x.req.Model
	}
	rec := usageRecord{Usage: u, Model: model, ProviderRequestID: reply.RequestID, Attempt: a.N, PossibleDuplicates: x.dups}
	rec.CostMicros, rec.CostKnown = x.g.cfg.Prices.Cost(model, u)
	if rec.CostKnown {
		rec.Currency = x.g.cfg.Prices.Currency
	}
	usage := rec.encode()
	r.Usage = usage
	if rec.CostKnown {
		cost := rec.CostMicros
		r.CostMicros = &cost
	}
	r.Result = &ops.Result{ProviderRef: answerRef(ans, reply.RequestID), ProviderRequestID: reply.RequestID, Body: body, Usage: usage, CostMicros: rec.CostMicros}
	return r, body
}

// answerRef is the provider's name for an answer: its own id, or for an answer that has none
// (a list of embeddings) the provider's request id, or from a provider that sends neither,
// a digest of the answer it gave.
func answerRef(a answer, requestID string) string {
	switch {
	case a.id != "":
		return a.id
	case requestID != "":
		return requestID
	}
	sum := sha256.Sum256(a.body)
	return "sha256:" + hex.EncodeToString(sum[:12])
}

// answer ends the request that ran the operation.
func (x *exchange) answer(op *ops.Operation, res ops.AttemptResult, reply Reply, body []byte) error {
	if op.Status == ops.StatusSucceeded {
		if x.req.Stream {
			if !x.began {
				return x.replay(op, "")
			}
			x.end(x.api.done())
			return nil
		}
		if x.began {
			return nil // a background response's client had it as it was created
		}
		if err := x.out.Begin(Head{OperationID: op.ID, ProviderRequestID: op.ProviderRequestID, Length: len(body)}); err != nil {
			return nil // the client left; the completion is stored for its retry
		}
		x.began = true
		x.write(body)
		return nil
	}
	unknown := ""
	if op.Status == ops.StatusUnknown || op.Status == ops.StatusExpired {
		unknown = x.g.whatNext(x.ctx, op)
	}
	// A send that followed an uncertain attempt, in this request or before it, says an
	// earlier attempt of the call may have been billed, whatever the last one got.
	earlier := x.possibleDup || x.dups > 0
	return x.fail(failure(op, res, reply, x.api.noun(), unknown, earlier))
}

// fail answers an error: returned while nothing was sent, written into the stream after
// (Complete words the returned one for an outage of the database).
func (x *exchange) fail(err error) error {
	if x.began {
		return x.streamFailed(x.outage(err))
	}
	return err
}

// outage words err, when it is an outage of the database, for the client (ops rule 12): a
// request that stopped before the provider was asked sent nothing; after, the provider may
// have generated (and billed) it, and what a retry with the key does then depends on the
// policy: an interactive call is sent again, a batch one waits for a lookup.
func (x *exchange) outage(err error) error {
	switch {
	case !ops.Unreachable(err):
		return err
	case !x.sent && ops.ErrorReason(err) != ops.ReasonOutcomeUnrecorded:
		return ops.NothingSent(err, "Retry with the same Idempotency-Key in a few seconds.")
	case x.op == nil:
		return ops.MayHaveRun(err, "Retry with the same Idempotency-Key in a few seconds.")
	}
	lease := x.g.cfg.Ledger.Limits.Lease
	next := fmt.Sprintf("A retry with the same Idempotency-Key goes on with operation %s once its lease runs out (%s) and sends it again: the provider takes no idempotency key, so it may generate and bill it a second time, which Settle counts as a possible duplicate.", x.op.ID, lease)
	if x.canLookUp(x.op) {
		next = fmt.Sprintf("A retry with the same Idempotency-Key goes on with operation %s once its lease runs out (%s): Settle first asks %s for what its attempts generated and answers with it; only if it shows nothing is the call sent again.", x.op.ID, lease, x.op.Provider)
	}
	if !x.g.policy(x.mode).RetryUncertain {
		next = fmt.Sprintf("Once operation %s's lease runs out (%s) its outcome is unknown. %s", x.op.ID, lease, x.g.whatNext(context.WithoutCancel(x.ctx), x.op))
	}
	return ops.MayHaveRun(err, next)
}

// failure explains to the client why its request ended without an answer (noun names one);
// unknown says what happens to an operation whose outcome is unknown (Gateway.whatNext);
// earlier says an earlier attempt may have been billed, so a last attempt refused at the
// door does not make "nothing was billed" true (ops rule 12).
func failure(op *ops.Operation, res ops.AttemptResult, reply Reply, noun, unknown string, earlier bool) error {
	next := fmt.Sprintf(" Retrying with the same key goes on with operation %s.", op.ID)
	if op.Status == ops.StatusUnknown || op.Status == ops.StatusExpired {
		next = " The provider may have billed it. " + unknown
	}
	billed, sent := " nothing was billed.", " nothing was sent."
	if earlier {
		billed = " this attempt was not billed, but an earlier attempt of this call may have been generated and billed."
		sent = " this attempt was not sent, but an earlier attempt of this call may have been generated and billed."
	}
	p := &Problem{UpstreamStatus: reply.HTTPStatus}
	e := &ops.Error{Code: ops.EUNAVAILABLE, Err: p}
	switch {
	case res.Outcome == ops.OutcomeInvalid && res.ErrorCode == "upstream_auth":
		e.Reason, e.Message = ReasonUpstreamAuth, "The provider refused the gateway's credentials;"+billed
	case res.Outcome == ops.OutcomeInvalid:
		e.Code, e.Reason = ops.EINVALID, ReasonRefused
		e.Message = "The provider refused the request: " + reply.Message
	case res.Outcome == ops.OutcomeRateLimited:
		p.RetryAfter = max(res.RetryAfter, time.Second)
		e.Reason, e.Message = ReasonRateLimited, "The provider is limiting requests;"+billed+next
	case res.Outcome == ops.OutcomeNotSent:
		e.Reason, e.Message = ReasonUnreachable, "The provider could not be reached;"+sent+next
	case res.ErrorCode == "upstream_bad_response":
		e.Reason, e.Message = ReasonBadResponse, "The provider's answer was not a "+noun+"."+next
	case res.ErrorCode == "upstream_timeout":
		e.Reason, e.Message = ReasonTimeout, "The provider did not finish its answer in time."+next
	case res.ErrorCode == "stream_broken":
		e.Reason, e.Message = ReasonUpstreamError, "The provider's stream broke off before it ended."+next
	default:
		e.Reason, e.Message = ReasonUpstreamError, "The provider failed to answer."+next
	}
	return e
}
