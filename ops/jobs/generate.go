package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// errBudgetSpent refuses a new generation when the job's budget cannot pay for a send.
var errBudgetSpent = errors.New("the job's budget is spent")

// computation finds or makes the generation of the job's dedup key through the ledger's
// admission: a succeeded one answers every job of that key, so two jobs with one input share
// one generation; an open one is resumed or waited for; a failed one makes way for a new
// one within the job's budget. It returns the operation as it stands after this worker is
// done with it.
func (r *run) computation(ctx, bg context.Context, body []byte) (*ops.Operation, error) {
	j, l := r.j, r.w.Ledger
	intent := IntentKey(j.DedupKey)
	budget := ""
	// The new generation's worst case, held against its tenant's leftover from its check
	// until its run ends; given back at once on every path that sends nothing of it.
	var hold *llm.Hold
	defer func() { hold.Unsent() }()
	adm, err := l.Admit(bg, ops.Intent{TenantID: j.TenantID, Kind: ops.KindLLMJob, Provider: r.w.Upstream.Name(),
		IntentKey: intent, Fingerprint: j.DedupKey, ChatRef: "job:" + j.ID, Request: r.request(body),
		RequestRef: "job:" + j.ID, Owner: r.owner, Holds: j.OperationID,
		// The API's reuse path only ever answers from a generation that succeeded.
		ReplayOnly: r.noSend,
		// A dedup key names one computation for good: its success answers every later job.
		ReplayFor: forever, HoldFailed: failedHold,
		// A generation whose text is gone (purged) answers no new job: it generates anew.
		NeedsResult: true,
		Check: func(ctx context.Context) error {
			if budget = r.spent(r.now(), r.estimate(body)); budget != "" {
				return errBudgetSpent
			}
			hold.Unsent()
			h, err := r.w.Budgets.CheckGeneration(ctx, j.TenantID, r.size(body), j.ModelProfile)
			if hold = h; err != nil {
				return err
			}
			// A worker that lost the job's lease (it stalled, another took over) must not
			// open a generation it will not send.
			if err := r.w.Store.ExtendJob(ctx, j.ID, r.owner, r.now(), r.now().Add(l.Limits.Lease)); err != nil {
				return fmt.Errorf("confirm the job's lease: %w", err)
			}
			return nil
		}})
	if r.noSend && ops.ErrorCode(err) == ops.ENOTFOUND {
		return nil, r.requeue(bg, 0, "", "")
	}
	if errors.Is(err, errBudgetSpent) {
		return nil, r.fail(bg, "budget_exhausted", "The job's retry budget is spent ("+budget+") before a generation could be sent.")
	}
	if held(err) {
		return nil, r.waitForBudget(bg, err, "")
	}
	if err != nil {
		return nil, fmt.Errorf("admit generation: %w", err)
	}
	if adm.TookOver {
		// The dead worker's send may have been billed: count it against the budget.
		if _, err := r.change(bg, JobChange{Status: StatusRunning, OperationID: adm.Op.ID, AddCost: r.estimate(nil)}); err != nil {
			return nil, err
		}
	}
	switch adm.Verdict {
	case ops.VerdictSend:
		op, err := r.send(ctx, bg, adm.Op, adm.Attempt, body, adm.PossibleDuplicate)
		hold.Ended(op)
		return op, err
	case ops.VerdictConflict:
		// The fingerprint is the dedup key itself, so only an operation opened some other
		// way holds this intent with another one: nothing is sent for it.
		return nil, fmt.Errorf("admit generation: %w", ops.Errorf(ops.EINVALID,
			"This intent is already open as operation %s with other parameters.", adm.Op.ID))
	case ops.VerdictReplay, ops.VerdictInFlight:
		// This job is the generation's duplicate request: it waits for it or uses it.
		if adm.ClientRequestID == 0 {
			return adm.Op, nil
		}
		_, err = r.change(bg, JobChange{Status: StatusRunning, OperationID: adm.Op.ID})
		return adm.Op, err
	}
	return adm.Op, nil
}

// forever is how long a generation answers its dedup key.
const forever = 100 * 365 * 24 * time.Hour

// failedHold is how long a generation a person closed as failed, although the provider may
// have run it, keeps its dedup key from a new generation: as long as a gateway key lives.
const failedHold = 24 * time.Hour

// join records this job as a duplicate request of a generation that succeeded: it is
// answered from it and nothing is sent.
func (r *run) join(ctx context.Context, op *ops.Operation) error {
	if r.j.OperationID == op.ID {
		return nil
	}
	adm, err := r.w.Ledger.Admit(ctx, ops.Intent{TenantID: r.j.TenantID, Kind: ops.KindLLMJob, Provider: op.Provider,
		IntentKey: op.IntentKey, Fingerprint: op.Fingerprint, RequestRef: "job:" + r.j.ID, Holds: r.j.OperationID,
		ReplayOnly: true})
	if err == nil && adm.Verdict != ops.VerdictReplay {
		err = ops.Errorf(ops.EINVALID, "The intent of generation %s is held by operation %s with other parameters.", op.ID, adm.Op.ID)
	}
	if err != nil {
		return fmt.Errorf("join generation %s: %w", op.ID, err)
	}
	_, err = r.change(ctx, JobChange{Status: StatusRunning, OperationID: op.ID})
	return err
}

// send sends op's generation through the ledger's attempt loop until its outcome is
// settled or the job's budget is spent. possibleDup says op's last attempt may have been
// billed, so a resend counts as a possible duplicate.
func (r *run) send(ctx, bg context.Context, op *ops.Operation, a *ops.Attempt, body []byte, possibleDup bool) (*ops.Operation, error) {
	l, opID := r.w.Ledger, op.ID
	if _, err := r.change(bg, JobChange{Status: StatusRunning, OperationID: op.ID}); err != nil {
		return nil, err
	}
	estimate := r.estimate(body)
	dups := 0
	send := ops.SenderFunc(func(_ context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		reply := r.w.Upstream.Send(bg, llm.Call{Body: body, OperationID: op.ID, TenantID: op.TenantID, Attempt: a.N})
		if reply.Outcome == ops.OutcomeOK {
			r.w.atPoint(CrashAfterResponse)
		}
		res, _ := r.result(a, reply, estimate, r.j.PossibleDuplicates+dups)
		return res
	})
	op, err := l.Run(ctx, op, send, ops.RunSpec{Owner: r.owner, First: a, PossibleDuplicate: possibleDup, Sleep: r.w.Sleep,
		Hooks: ops.Hooks{
			// The provider takes no key: what an uncertain attempt generated is looked up
			// before anything is sent again, and settles the generation when it is found.
			LookFirst: r.w.lookups().LookFirst,
			Spent: func(now time.Time) string {
				r.spentReason = r.spent(now, estimate)
				return r.spentReason
			},
			BeforeSend: func(ctx context.Context, _ *ops.Operation, next *ops.Attempt, possibleDup bool) error {
				if err := r.budgetBeforeSend(ctx, a, next); err != nil {
					return err
				}
				dups = 0
				if possibleDup {
					dups = 1
				}
				if _, err := r.change(ctx, JobChange{Status: StatusRunning, AddAttempts: 1, AddDuplicates: dups}); err != nil {
					// The job is no longer ours: nothing is sent, and the next worker goes on
					// with this operation.
					return &ops.Error{Code: ops.ECONFLICT, Reason: "job_lease_lost", Message: "The job's lease was lost.", Err: err}
				}
				return nil
			},
			AfterAttempt: func(ctx context.Context, op *ops.Operation, res ops.AttemptResult) error {
				if cost := r.cost(res, estimate); cost > 0 {
					if _, err := r.change(ctx, JobChange{Status: StatusRunning, AddCost: cost}); err != nil {
						return err
					}
				}
				if op.Status == ops.StatusSucceeded {
					r.w.atPoint(CrashAfterResult)
				}
				return nil
			},
		}})
	if held(err) {
		return nil, r.waitForBudget(bg, err, opID)
	}
	if ops.ErrorReason(err) == ops.ReasonNotLookedUp {
		// An earlier attempt may have generated and the provider could not be asked: nothing
		// is sent until it can be, so the job looks again after a pause.
		return nil, r.requeue(bg, l.Limits.Lease, ops.ReasonNotLookedUp, ops.ErrorMessage(err))
	}
	if err != nil {
		return nil, err
	}
	if op.Status == ops.StatusInProgress {
		// This call's attempts are spent or the worker is stopping: the next worker goes on
		// with the same operation.
		return nil, r.requeue(bg, 0, "", "")
	}
	return op, nil
}

// spent says which part of the job's budget a send costing estimate would overrun, or "".
func (r *run) spent(now time.Time, estimate int64) string {
	j := r.j
	switch {
	case j.LLMAttempts >= j.MaxAttempts:
		return fmt.Sprintf("%d attempts", j.MaxAttempts)
	case !now.Before(j.Deadline):
		return "deadline " + j.Deadline.UTC().Format(time.RFC3339)
	case j.MaxCostMicros > 0 && j.CostMicros+estimate > j.MaxCostMicros:
		return fmt.Sprintf("cost %d of %d micros", j.CostMicros+estimate, j.MaxCostMicros)
	}
	return ""
}

// estimate is what one send of body may cost at most: its prompt (about four characters a
// token) and the profile's full completion.
func (r *run) estimate(body []byte) int64 {
	prof := r.catalog().Profiles[r.j.ModelProfile]
	if body == nil {
		body = make([]byte, 4*prof.MaxTokens)
	}
	c, _ := r.w.Prices.Cost(prof.Model, llm.Usage{PromptTokens: len(body) / 4, CompletionTokens: prof.MaxTokens})
	return c
}

// result turns the provider's reply into what the ledger records, and says what the send
// cost the job's budget: the real cost of a completion, the estimate of an uncertain send.
func (r *run) result(a *ops.Attempt, reply llm.Reply, estimate int64, dups int) (ops.AttemptResult, int64) {
	res := ops.AttemptResult{Outcome: reply.Outcome, HTTPStatus: reply.HTTPStatus, ProviderRequestID: reply.RequestID,
		ErrorCode: reply.ErrorCode, RetryAfter: reply.RetryAfter}
	switch reply.Outcome {
	case ops.OutcomeOK:
	case ops.OutcomeTimeout, ops.OutcomeKeyInUse, ops.OutcomeServerError:
		return res, estimate
	default:
		return res, 0
	}
	c, err := parseCompletion(reply.Body)
	if err != nil {
		// Not a completion, yet answered 200: the provider may have billed it.
		res.Outcome, res.ErrorCode = ops.OutcomeTimeout, "upstream_bad_response"
		return res, estimate
	}
	u := c.Usage
	cost, known := r.w.Prices.Cost(c.Model, u)
	usage := mustJSON(map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
		"cached_tokens": u.CachedTokens, "model": c.Model, "cost_micros": cost, "cost_known": known,
		"provider_request_id": reply.RequestID, "attempt": a.N, "possible_duplicates": dups})
	res.Result = &ops.Result{ProviderRef: c.ID, ProviderRequestID: reply.RequestID, Body: reply.Body, Usage: usage, CostMicros: cost}
	return res, cost
}

// cost is what an attempt cost the job's budget: the real cost of a completion, the
// estimate of a send that may have been billed.
func (r *run) cost(res ops.AttemptResult, estimate int64) int64 {
	switch {
	case res.Result != nil:
		return res.Result.CostMicros
	case res.Outcome.Uncertain():
		return estimate
	}
	return 0
}

// request is what the operation shows of the job in the dashboard.
func (r *run) request(body []byte) json.RawMessage {
	j := r.j
	return mustJSON(map[string]any{"job_id": j.ID, "dedup_key": j.DedupKey, "pipeline": j.Pipeline,
		"prompt_version": j.PromptVersion, "model_profile": j.ModelProfile, "document_hash": j.DocumentHash,
		"document_ref": j.DocumentRef, "body": json.RawMessage(body)})
}
