package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// computation finds or makes the generation of the job's dedup key. It checks for a
// succeeded one first, every time, so that two jobs with one input share one generation.
// It returns the operation as it stands after this worker is done with it.
func (r *run) computation(ctx, bg context.Context, body []byte) (*ops.Operation, error) {
	j, l := r.j, r.w.Ledger
	intent := IntentKey(j.DedupKey)
	for range 4 {
		latest, err := r.w.Store.LatestForIntent(bg, j.TenantID, ops.KindLLMJob, intent)
		latestID := ""
		switch {
		case ops.ErrorCode(err) == ops.ENOTFOUND:
		case err != nil:
			return nil, err
		case latest.Status == ops.StatusSucceeded:
			return latest, r.join(bg, latest)
		case latest.Status == ops.StatusFailed:
			// A definite failure, or a person closing it as not executed: a new
			// computation may run within the job's budget.
			latestID = latest.ID
		case latest.Status == ops.StatusUnknown || latest.Status == ops.StatusExpired:
			return latest, nil
		case r.noSend:
			return latest, nil
		case latest.Leased(r.now()) && latest.LeaseOwner != r.owner:
			return latest, nil
		default:
			// Received, or in progress under a lease that ran out: its worker died.
			op, err := l.Claim(bg, latest, r.owner)
			if ops.ErrorCode(err) == ops.ECONFLICT {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("take over operation %s: %w", latest.ID, err)
			}
			return r.send(ctx, bg, op, nil, body, true)
		}
		if r.noSend {
			return nil, r.requeue(bg, 0, "", "")
		}
		if reason := r.spent(r.now(), r.estimate(body)); reason != "" {
			return nil, r.fail(bg, "budget_exhausted", "The job's retry budget is spent ("+reason+") before a generation could be sent.")
		}
		// A worker that lost the job's lease (it stalled, another took over) must not open a
		// generation it will not send.
		if err := r.w.Store.ExtendJob(bg, j.ID, r.owner, r.now(), r.now().Add(l.Limits.Lease)); err != nil {
			return nil, fmt.Errorf("confirm the job's lease: %w", err)
		}
		o, err := l.Open(bg, ops.Intent{TenantID: j.TenantID, Kind: ops.KindLLMJob, Provider: r.w.Upstream.Name(),
			IntentKey: intent, Fingerprint: j.DedupKey, ChatRef: "job:" + j.ID, Request: r.request(body), Latest: &latestID},
			"job:"+j.ID, r.owner)
		if ops.ErrorCode(err) == ops.ECONFLICT {
			continue // superseded: another worker opened it first
		}
		if err != nil {
			return nil, fmt.Errorf("open generation: %w", err)
		}
		if !o.Created {
			continue // opened meanwhile by another worker: look at it again
		}
		return r.send(ctx, bg, o.Op, o.Attempt, body, false)
	}
	return nil, fmt.Errorf("the generation of %s kept changing under this worker", intent)
}

// join records this job as a duplicate request of a generation that succeeded: it is
// answered from it and nothing is sent.
func (r *run) join(ctx context.Context, op *ops.Operation) error {
	if r.j.OperationID == op.ID {
		return nil
	}
	o, err := r.w.Ledger.Join(ctx, op.ID, op.Fingerprint, "job:"+r.j.ID)
	if err != nil {
		return fmt.Errorf("join generation %s: %w", op.ID, err)
	}
	if err := r.w.Ledger.Answer(ctx, o.ClientRequestID, ops.AnswerReplayed); err != nil {
		return err
	}
	_, err = r.change(ctx, JobChange{Status: StatusRunning, OperationID: op.ID})
	return err
}

// send sends op's generation through the ledger's attempt loop until its outcome is
// settled or the job's budget is spent. takeover says op was claimed from a worker that
// died, whose last attempt may have been billed.
func (r *run) send(ctx, bg context.Context, op *ops.Operation, a *ops.Attempt, body []byte, takeover bool) (*ops.Operation, error) {
	l := r.w.Ledger
	if _, err := r.change(bg, JobChange{Status: StatusRunning, OperationID: op.ID}); err != nil {
		return nil, err
	}
	possibleDup := false
	if takeover {
		cur, retry, uncertain, err := l.FinishDangling(bg, op, r.owner, nil)
		if err != nil || !retry {
			return cur, err
		}
		if cur.Version != op.Version {
			// The dead worker's send may have been billed: count it against the budget.
			if _, err := r.change(bg, JobChange{Status: StatusRunning, AddCost: r.estimate(nil)}); err != nil {
				return nil, err
			}
		}
		op, possibleDup = cur, uncertain
	}
	estimate := r.estimate(body)
	dups := 0
	send := ops.SenderFunc(func(_ context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		reply := r.w.Upstream.Send(bg, llm.Call{Body: body, OperationID: op.ID, Attempt: a.N})
		if reply.Outcome == ops.OutcomeOK {
			r.w.atPoint(CrashAfterResponse)
		}
		res, _ := r.result(a, reply, estimate, r.j.PossibleDuplicates+dups)
		return res
	})
	op, err := l.Run(ctx, op, send, ops.RunSpec{Owner: r.owner, First: a, PossibleDuplicate: possibleDup, Sleep: r.w.Sleep,
		Hooks: ops.Hooks{
			Spent: func(now time.Time) string {
				r.spentReason = r.spent(now, estimate)
				return r.spentReason
			},
			BeforeSend: func(ctx context.Context, _ *ops.Operation, _ *ops.Attempt, possibleDup bool) error {
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
	u := llm.Usage{}
	if c.Usage != nil {
		u.PromptTokens, u.CompletionTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
		if c.Usage.PromptTokensDetails != nil {
			u.CachedTokens = c.Usage.PromptTokensDetails.CachedTokens
		}
	}
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
