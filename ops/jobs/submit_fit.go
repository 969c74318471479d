package jobs

import (
	"context"
	"fmt"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// ReasonOverWholeBudget is the reason of a job refused at submission (422) because its
// generation's worst case costs more than its tenant's whole LLM budget of a day: no day's
// budget pays for it, so waiting does not help, unlike llm_budget_too_small's 429 on the
// gateway, which a smaller call or midnight answers. A client tells "never" from "not
// today" by the reason alone.
const ReasonOverWholeBudget = llm.ReasonOverWholeBudget

// generationSize is what the generation of body, the chat completion of a job of profile
// prof, may ask of its tenant's budget at most: its bytes as input tokens, and the
// profile's max_tokens, which the body names, as output. Submission and the worker size it
// alike, so a job refused at submission is one the worker would fail at once.
func generationSize(prof Profile, body []byte) llm.CallSize {
	return llm.CallSize{Model: prof.Model, InputTokens: int64(len(body)), OutputCap: int64(prof.MaxTokens)}
}

// record inserts j, the job in asks for, with its uploaded checkpoint, unless its tenant's
// LLM budget refuses it (budgetRefusal); then refuseUnlessKeyed answers it.
func (s *Service) record(ctx context.Context, in Submission, j *Job) (*Job, bool, error) {
	up := Checkpoint{Stage: StageUploaded, InputHash: j.DocumentHash, CodeVersion: uploadVersion, Status: CheckpointOK,
		Result: mustJSON(map[string]any{"document_hash": j.DocumentHash, "document_ref": in.Document.Ref, "bytes": len(in.Document.Text)})}
	refusal := s.budgetRefusal(in)
	if refusal == nil {
		return s.Store.InsertJob(ctx, j, up)
	}
	if ops.ErrorReason(refusal) == ReasonOverWholeBudget {
		// A succeeded generation of its dedup key answers the job without a send, so it asks
		// nothing of the budget: it is accepted (InsertJob also answers a key it finds).
		op, err := s.Store.LatestForIntent(ctx, j.TenantID, ops.KindLLMJob, IntentKey(j.DedupKey))
		switch {
		case err == nil && op.Status == ops.StatusSucceeded && op.PurgedAt == nil:
			return s.Store.InsertJob(ctx, j, up)
		case err != nil && ops.ErrorCode(err) != ops.ENOTFOUND:
			return nil, false, fmt.Errorf("find the job's generation: %w", err)
		}
	}
	return s.refuseUnlessKeyed(ctx, in, j, refusal)
}

// budgetRefusal is what a budgeted tenant's budget says of the job in asks for, checked in
// this order: its profile's model not priced (priced), then its generation over the whole
// budget of a day (overBudget); nil when neither.
func (s *Service) budgetRefusal(in Submission) error {
	if err := s.priced(in, s.catalog().Profiles[in.ModelProfile].Model); err != nil {
		return err
	}
	return s.overBudget(in)
}

// refuseUnlessKeyed is the one place that answers a submission its tenant's budget refuses:
// a key that already names a job (made before the tenant got its budget or had it lowered;
// the worker's checks hold that job) answers that job and counts the repeat, since a retry
// of a key answers the key's job and a refusal would tell of no job where there is one
// (ops rule 12); the same key with another request is answered as reused by Submit. Any
// other submission is refused, recorded as the tenant's refused request (ops rule 8), and
// one refused as over the whole budget counts in the budgets' refusals as well, beside the
// jobs the workers hold back or fail for their budget.
func (s *Service) refuseUnlessKeyed(ctx context.Context, in Submission, j *Job, refusal error) (*Job, bool, error) {
	got, err := s.Store.RepeatJob(ctx, j.TenantID, j.IdempotencyKey, j.RequestFingerprint)
	if ops.ErrorCode(err) != ops.ENOTFOUND {
		return got, false, err
	}
	s.Budgets.Refused(in.TenantID, ops.ErrorReason(refusal), ops.Call{API: llm.ChatAPI()}.Label(), llm.CallerJob)
	return nil, false, s.Refuse(ctx, in.TenantID, ops.CleanRef(in.RequestRef), refusal)
}

// overBudget refuses (ReasonOverWholeBudget) a job of a tenant with an LLM budget whose
// generation's worst case, sized as the worker sizes it from the document's text, costs more
// than the whole budget of a day; nil for any other job. A document sent by reference is
// not read here: its worker's check holds it.
func (s *Service) overBudget(in Submission) error {
	if in.LLMBudgetMicros <= 0 || in.Document.Text == "" {
		return nil
	}
	cat := s.catalog()
	prof := cat.Profiles[in.ModelProfile]
	body := chatBody(cat.Prompts[in.Pipeline][in.PromptVersion], prof, chunkText(extractText(in.Document.Text), cat.ChunkSize))
	size := generationSize(prof, body)
	fit := s.prices().FitADay(size, in.LLMBudgetMicros)
	if !fit.Over {
		return nil
	}
	money := func(m int64) string { return ops.FormatMicrosExact(m, s.prices().CurrencyOf()) }
	what := "Even an answer of no tokens does not fit with this document."
	if fit.LargestCap >= 1 {
		what = fmt.Sprintf("With this document, a profile's max_tokens of at most %d fits the budget.", fit.LargestCap)
	}
	if fit.LargestInput >= 0 {
		what += fmt.Sprintf(" With this profile, a prompt of at most %d bytes fits it.", fit.LargestInput)
	} else {
		what += " With this profile no document fits: its answer alone may cost more than the budget."
	}
	return &ops.Error{Code: ops.EINVALID, Reason: ReasonOverWholeBudget,
		Message: fmt.Sprintf("This job's generation may cost up to %s (its prompt's %d bytes, the document's text with the pipeline's instructions, "+
			"counted as input tokens of %s, and an answer of up to %d tokens, the max_tokens of model profile %q), more than your tenant's whole "+
			"LLM budget of %s a day: no day's budget pays for it, so waiting does not help; this job was recorded as refused, no job was made "+
			"and nothing of it was sent. %s Choose a model profile with fewer max_tokens or a cheaper model, send a shorter document, "+
			"or ask the operator to raise the tenant's budget.",
			money(fit.Worst), size.InputTokens, size.Model, fit.Output, in.ModelProfile, money(in.LLMBudgetMicros), what)}
}

// BudgetRefusals are the refusals the service's budgets counted (Budgets.Refusals): none
// without budgets.
func (s *Service) BudgetRefusals() []llm.BudgetRefusal { return s.Budgets.Refusals() }

// catalog is the service's catalog, the default one when none is set.
func (s *Service) catalog() *Catalog {
	if s.Catalog != nil {
		return s.Catalog
	}
	return DefaultCatalog()
}

// prices is the price table the workers cost generations with.
func (s *Service) prices() *llm.PriceTable {
	if s.Prices != nil {
		return s.Prices
	}
	return llm.DefaultPrices()
}
