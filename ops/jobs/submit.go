package jobs

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// Document is what a client sends to be summarised: the text, or its hash and a reference
// a DocumentSource can fetch.
type Document struct {
	Text string
	// Hash is the hex SHA-256 of the document's bytes ("sha256:" prefix allowed).
	Hash string
	Ref  string
}

// Submission is one client request to run a job.
type Submission struct {
	TenantID int64
	// IdempotencyKey is the key itself, out of its header: the web route parses the header
	// with llm.ParseKey, the one Idempotency-Key parser, and Submit checks the key with
	// llm.CheckKey.
	IdempotencyKey string
	// RequestRef ties the logs of one run; it is not part of the intent.
	RequestRef    string
	Document      Document
	Pipeline      string
	PromptVersion string
	ModelProfile  string
	// LLMBudgetMicros is the tenant's LLM budget per UTC day as its token read it (0: none):
	// a budgeted tenant may not submit a job of a model the price table does not price, nor
	// one whose generation may cost more than the whole budget of a day (overBudget).
	LLMBudgetMicros int64
}

// Submitted is what a submission became.
type Submitted struct {
	Job *Job
	// Created is false when the key named a job submitted before.
	Created bool
}

// Reasons carried by the errors of Submit, for the transport to map.
const (
	ReasonMissingKey   = llm.ReasonMissingKey
	ReasonInvalidKey   = llm.ReasonInvalidKey
	ReasonKeyReused    = "idempotency_key_reused"
	ReasonBadDocument  = "invalid_document"
	ReasonHashMismatch = "document_hash_mismatch"
)

// maxText is the largest document text a submission may carry.
const maxText = 512 << 10

// Service accepts jobs and answers what they became.
type Service struct {
	Store Store
	// Ledger records each refused submission as its tenant's client request (Refuse). A
	// service that accepts requests needs it: without it refusals go unrecorded.
	Ledger  *ops.Ledger
	Catalog *Catalog
	// Prices is the price table the workers cost generations with; nil is the built-in one.
	Prices *llm.PriceTable
	// Budgets counts the submissions refused as over their tenant's whole LLM budget of a
	// day (llm.Budgets.Refused), with the refusals of the process's gateway and job workers
	// when it is theirs; nil counts nothing.
	Budgets *llm.Budgets
	Clock   ops.Clock
	// MaxAttempts, Deadline and MaxCostMicros are the retry budget of new jobs; defaults
	// 3 sends, 1 hour, no cost cap.
	MaxAttempts   int
	Deadline      time.Duration
	MaxCostMicros int64
	// Reuse, when set, publishes at once a new job whose dedup key already has a succeeded
	// generation, without waiting for a worker and without a new generation.
	Reuse  *Worker
	Logger *slog.Logger
}

// Submit records a job for the intent, or returns the job its key already names. The same
// key with another document, pipeline, prompt version or profile is refused.
func (s *Service) Submit(ctx context.Context, in Submission) (Submitted, error) {
	j, err := s.newJob(in)
	if err != nil {
		return Submitted{}, s.Refuse(ctx, in.TenantID, ops.CleanRef(in.RequestRef), err)
	}
	got, created, err := s.record(ctx, in, j)
	if err != nil {
		return Submitted{}, err
	}
	if !created && got.RequestFingerprint != j.RequestFingerprint {
		// Refused as every malformed submission is: its job is not touched (InsertJob counts
		// a repeat only of the same request) and the request is recorded (ops rule 8).
		return Submitted{Job: got}, s.Refuse(ctx, in.TenantID, ops.CleanRef(in.RequestRef), &ops.Error{Code: ops.EINVALID, Reason: ReasonKeyReused,
			Message: "This Idempotency-Key was used for job " + got.ID + " with another document, pipeline, prompt version or model profile."})
	}
	if created && s.Reuse != nil {
		if done, err := s.Reuse.TryReuse(ctx, got); err != nil {
			s.logger().WarnContext(ctx, "answer job from an existing generation", "job", got.ID, "err", err)
		} else {
			got = done
		}
	}
	return Submitted{Job: got, Created: created}, nil
}

// Refuse records a job request refused before a job was recorded for it (malformed, an
// unusable key, a key reused for another request), so every client request is counted
// (ops rule 8), and returns its answer: the refusal, or the outage that kept it from being
// recorded.
func (s *Service) Refuse(ctx context.Context, tenantID int64, requestRef string, refusal error) error {
	if s.Ledger == nil || tenantID <= 0 {
		return refusal
	}
	return s.Ledger.Refuse(ctx, tenantID, ops.KindLLMJob, requestRef, refusal)
}

// newJob checks a submission and returns the job it asks for, not yet recorded.
func (s *Service) newJob(in Submission) (*Job, error) {
	if in.IdempotencyKey == "" {
		return nil, &ops.Error{Code: ops.EINVALID, Reason: ReasonMissingKey, Message: "Send an Idempotency-Key header: one key per job you mean to run."}
	}
	if err := llm.CheckKey(in.IdempotencyKey); err != nil {
		return nil, err
	}
	for _, f := range []struct{ name, v string }{{"request_ref", in.RequestRef}, {"document.ref", in.Document.Ref},
		{"pipeline", in.Pipeline}, {"prompt_version", in.PromptVersion}, {"model_profile", in.ModelProfile}} {
		if err := ops.CheckRef(f.name, f.v, ops.MaxRefBytes); err != nil {
			return nil, err
		}
	}
	cat := s.catalog()
	if err := cat.check(in.Pipeline, in.PromptVersion, in.ModelProfile); err != nil {
		return nil, err
	}
	hash, err := documentHash(in.Document)
	if err != nil {
		return nil, err
	}
	now := s.Clock.Now()
	j := &Job{
		ID: ops.NewOperationID(), TenantID: in.TenantID, IdempotencyKey: in.IdempotencyKey, RequestRef: in.RequestRef,
		DocumentHash: hash, DocumentRef: in.Document.Ref, DocumentText: in.Document.Text,
		Pipeline: in.Pipeline, PromptVersion: in.PromptVersion, ModelProfile: in.ModelProfile,
		MaxAttempts: s.MaxAttempts, MaxCostMicros: s.MaxCostMicros, CreatedAt: now,
	}
	if j.MaxAttempts <= 0 {
		j.MaxAttempts = 3
	}
	deadline := s.Deadline
	if deadline <= 0 {
		deadline = time.Hour
	}
	j.Deadline = now.Add(deadline)
	// The intent: what the client asked for. The text is covered by its hash; the request
	// ref is transport and left out.
	j.RequestFingerprint = ops.Fingerprint(map[string]any{"document_hash": hash, "document_ref": in.Document.Ref,
		"pipeline": in.Pipeline, "prompt_version": in.PromptVersion, "model_profile": in.ModelProfile})
	j.DedupKey = DedupKey(in.TenantID, hash, in.Pipeline, in.PromptVersion, in.ModelProfile)
	return j, nil
}

// priced refuses, as the gateway refuses such a call, a job of a tenant with an LLM budget
// whose profile's model the price table does not price: its generations would cost nothing
// against the budget, so the budget would not hold them. record asks it once the job is
// otherwise well formed, so a key that already names a job answers that job instead.
func (s *Service) priced(in Submission, model string) error {
	if in.LLMBudgetMicros <= 0 || s.prices().Priced(model) {
		return nil
	}
	return llm.ModelNotPriced(model, fmt.Sprintf("this job was recorded as refused and nothing of it was sent. "+
		"Choose a model profile whose model the table prices, or ask the operator to price %q in SETTLE_LLM_PRICES or to remove the tenant's budget.", model))
}

// Get returns a job of the tenant with its checkpoints.
func (s *Service) Get(ctx context.Context, tenantID int64, id string) (*Job, []Checkpoint, error) {
	j, err := s.Store.GetJob(ctx, tenantID, id)
	if err != nil {
		return nil, nil, err
	}
	cps, err := s.Store.Checkpoints(ctx, j)
	if err != nil {
		return nil, nil, err
	}
	return j, cps, nil
}

func (s *Service) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// documentHash returns the document's hash: computed from the text when there is one (and
// checked against a hash sent with it), else the hash sent with a reference.
func documentHash(d Document) (string, error) {
	given := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d.Hash), "sha256:"))
	if given != "" {
		if b, err := hex.DecodeString(given); err != nil || len(b) != 32 {
			return "", &ops.Error{Code: ops.EINVALID, Reason: ReasonBadDocument, Message: "document.hash must be a hex SHA-256 (64 characters, optional sha256: prefix)."}
		}
	}
	switch {
	case d.Text != "":
		if len(d.Text) > maxText {
			return "", &ops.Error{Code: ops.EINVALID, Reason: ReasonBadDocument, Message: "document.text is over 512 KiB; send its hash and a reference instead."}
		}
		if len(strings.Fields(d.Text)) == 0 {
			// The pipeline keeps words only: this would pay for a summary of nothing.
			return "", errNoWords
		}
		h := hashBytes([]byte(d.Text))
		if given != "" && given != h {
			return "", &ops.Error{Code: ops.EINVALID, Reason: ReasonHashMismatch, Message: "document.hash is not the SHA-256 of document.text."}
		}
		return h, nil
	case given != "" && strings.TrimSpace(d.Ref) != "":
		return given, nil
	default:
		return "", &ops.Error{Code: ops.EINVALID, Reason: ReasonBadDocument, Message: "Send document.text, or document.hash with document.ref."}
	}
}

// errNoWords refuses a document whose text is only spaces and line breaks.
var errNoWords = &ops.Error{Code: ops.EINVALID, Reason: ReasonBadDocument, Message: "document.text holds no word: send the document's text."}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("jobs: encode: " + err.Error())
	}
	return b
}
