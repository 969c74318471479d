// Package jobs runs LLM pipeline jobs: "summarise this document with pipeline P,
// prompt version V, model profile M", once per client intent and one generation per
// distinct input, surviving any worker crash.
//
// Three keys are kept apart. The request ref ties the logs of one run. The client's
// Idempotency-Key is one intent: a repeated POST gets the same job. The dedup key is the
// hash of tenant, document hash, pipeline, prompt version and model profile: the
// computation. A job is a row of its own; its generation is a ledger operation of kind
// llm_job whose intent key is the dedup key, so jobs with one input share one operation,
// appear in the dashboard's queues like every operation, and an uncertain generation waits
// in the Unknown queue under the batch policy.
//
// Workers claim jobs with a lease (FOR UPDATE SKIP LOCKED in a short statement), look for a
// succeeded generation of the dedup key before every call, never hold a transaction across
// the call, and record each stage as a checkpoint (uploaded → text_extracted → chunks_ready →
// llm_done → validated → published) with its input hash, code version, status, attempt and
// result. Publishing writes the job, its checkpoint and a job.published event to the jobs'
// outbox in one transaction.
package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Status is where a job stands.
type Status string

// The job statuses.
const (
	// StatusQueued waits for a worker, from RunAfter on.
	StatusQueued Status = "queued"
	// StatusRunning is held by a worker's lease; a lease that ran out is taken over.
	StatusRunning Status = "running"
	// StatusPublished is final: the result is stored, and job.published is in the outbox
	// when a receiver of the job's tenant is registered (ops rule 10).
	StatusPublished Status = "published"
	// StatusUnknown waits for its operation, whose outcome is unknown, to be closed by the
	// reconciler or a person; no claim takes it. The close makes the job queued again, and a
	// worker picks it up at its tenant's turn.
	StatusUnknown Status = "unknown"
	// StatusFailed is final: the provider refused, validation failed or the budget is spent.
	StatusFailed Status = "failed"
)

// Stage names a checkpoint.
type Stage string

// The stages, in order.
const (
	StageUploaded      Stage = "uploaded"
	StageTextExtracted Stage = "text_extracted"
	StageChunksReady   Stage = "chunks_ready"
	StageLLMDone       Stage = "llm_done"
	StageValidated     Stage = "validated"
	StagePublished     Stage = "published"
)

// Stages lists the stages in order.
var Stages = []Stage{StageUploaded, StageTextExtracted, StageChunksReady, StageLLMDone, StageValidated, StagePublished}

// Checkpoint statuses.
const (
	CheckpointOK      = "ok"
	CheckpointFailed  = "failed"
	CheckpointUnknown = "unknown"
)

// TopicPublished is the topic of the event a published job sends.
const TopicPublished = "job.published"

// Job is one client intent of the pipeline.
type Job struct {
	ID                 string
	TenantID           int64
	IdempotencyKey     string
	RequestFingerprint string
	RequestRef         string
	DedupKey           string
	DocumentHash       string
	DocumentRef        string
	// DocumentText is the text the client sent; empty when it sent a hash and a reference.
	DocumentText  string
	Pipeline      string
	PromptVersion string
	ModelProfile  string

	Status      Status
	OperationID string
	LeaseOwner  string
	LeaseUntil  *time.Time
	RunAfter    time.Time
	Claims      int

	// LLMAttempts, PossibleDuplicates and CostMicros are what the job spent of its budget.
	LLMAttempts        int
	PossibleDuplicates int
	CostMicros         int64
	MaxAttempts        int
	MaxCostMicros      int64
	Deadline           time.Time

	DuplicatePosts int
	Result         json.RawMessage
	ErrorCode      string
	ErrorMessage   string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	PublishedAt    *time.Time
}

// Checkpoint is one stage of a computation, reused when the same input meets the same code.
type Checkpoint struct {
	TenantID    int64
	DedupKey    string
	JobID       string
	Stage       Stage
	InputHash   string
	CodeVersion string
	Status      string
	Attempt     int
	Result      json.RawMessage
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// JobChange is a guarded change of a job held by Owner: it applies only while Owner holds
// the job's lease and the job is running.
type JobChange struct {
	ID    string
	Owner string
	Now   time.Time
	// Status is the new status; running keeps the lease unless Release is set.
	Status Status
	// Release gives up the lease (always done for a status other than running).
	Release bool
	// RunAfter, for a queued job, is when it may be claimed again.
	RunAfter *time.Time
	// OperationID, when set, records the job's operation.
	OperationID   string
	AddAttempts   int
	AddDuplicates int
	AddCost       int64
	// ErrorCode and ErrorMessage replace the job's error (empty clears it).
	ErrorCode    string
	ErrorMessage string
}

// PublishParams is what publishing a job writes in one transaction.
type PublishParams struct {
	Job        *Job
	Owner      string
	Now        time.Time
	Result     json.RawMessage
	Checkpoint Checkpoint
	EventID    string
	// Payload is the event's data.
	Payload json.RawMessage
}

// Store keeps jobs and their checkpoints. Every method is one short statement; none is held
// across an LLM call.
type Store interface {
	// InsertJob inserts j with its uploaded checkpoint unless the tenant already has a job
	// with its idempotency key; then it returns that job (and counts the repeat).
	InsertJob(ctx context.Context, j *Job, uploaded Checkpoint) (*Job, bool, error)
	// RepeatJob returns the tenant's job with the idempotency key and counts the repeat, as
	// InsertJob does for a key it finds (a request of another fingerprint is no repeat), or
	// ENOTFOUND: a submission refused unless its key already names a job asks it.
	RepeatJob(ctx context.Context, tenantID int64, key, fingerprint string) (*Job, error)
	// GetJob returns a job of the tenant (any tenant for 0) or ENOTFOUND.
	GetJob(ctx context.Context, tenantID int64, id string) (*Job, error)
	// ClaimJobs leases up to limit runnable jobs to owner, skipping rows others hold:
	// queued jobs that are due and running jobs whose lease ran out. An unknown job is not
	// among them: the close of its operation makes it queued again. Tenants take turns: a
	// claim takes every tenant's oldest claimable job before any tenant's second, the tenant
	// claimed from least recently first, so one tenant's flood of jobs never holds up
	// another tenant's.
	ClaimJobs(ctx context.Context, owner string, now, leaseUntil time.Time, limit int) ([]*Job, error)
	// ClaimJob leases one job like ClaimJobs would; it counts as its tenant's turn.
	ClaimJob(ctx context.Context, id, owner string, now, leaseUntil time.Time) (*Job, error)
	// ExtendJob moves the lease of a job owner holds to until.
	ExtendJob(ctx context.Context, id, owner string, now, until time.Time) error
	// RequeueStranded makes queued again every unknown job whose operation is closed
	// (succeeded or failed) and says how many. A close queues its operation's unknown jobs
	// itself; this finds the ones a worker of an earlier release made unknown after such a
	// close, which no close will ever queue.
	RequeueStranded(ctx context.Context, now time.Time) (int, error)
	// ChangeJob applies a guarded change; a lost lease is ECONFLICT. A change to unknown
	// whose operation is no longer unknown or expired (closed by then) makes the job queued
	// instead: the close, which queues its operation's unknown jobs, has passed it by.
	ChangeJob(ctx context.Context, c JobChange) (*Job, error)
	// SaveCheckpoint records a checkpoint; an ok checkpoint is never overwritten.
	SaveCheckpoint(ctx context.Context, c Checkpoint) error
	// FindCheckpoint returns the checkpoint of a stage for an input and code version, or
	// ENOTFOUND.
	FindCheckpoint(ctx context.Context, dedupKey string, stage Stage, inputHash, codeVersion string) (*Checkpoint, error)
	// Checkpoints lists the newest checkpoint of each stage of the job's computation.
	Checkpoints(ctx context.Context, j *Job) ([]Checkpoint, error)
	// PublishJob marks the job published, writes its checkpoint and its event in one
	// transaction, if owner still holds it running. published says whether it did now.
	PublishJob(ctx context.Context, p PublishParams) (j *Job, published bool, err error)
	// LatestForIntent returns the newest operation of an intent or ENOTFOUND.
	LatestForIntent(ctx context.Context, tenantID int64, kind ops.Kind, intentKey string) (*ops.Operation, error)
}

// DedupKey is the key of a computation: tenant, document hash, pipeline, prompt version and
// model profile. A new prompt version or profile is a new computation, and a tenant never
// shares a result with another.
func DedupKey(tenantID int64, documentHash, pipeline, promptVersion, modelProfile string) string {
	return ops.Fingerprint(map[string]any{"tenant_id": tenantID, "document_hash": documentHash,
		"pipeline": pipeline, "prompt_version": promptVersion, "model_profile": modelProfile})
}

// IntentKey is the ledger intent key of a dedup key's generation.
func IntentKey(dedupKey string) string { return "job:" + dedupKey }

// hashBytes is the hex SHA-256 of b.
func hashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// hashJSON is the hex SHA-256 of v's JSON.
func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("jobs: hash of unencodable value: " + err.Error())
	}
	return hashBytes(b)
}
