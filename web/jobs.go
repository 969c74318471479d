package web

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/reqlog"
)

// JobService is what the jobs API needs: the job service of ops/jobs.
type JobService interface {
	Submit(ctx context.Context, in jobs.Submission) (jobs.Submitted, error)
	Get(ctx context.Context, tenantID int64, id string) (*jobs.Job, []jobs.Checkpoint, error)
	// Refuse records a request refused before it could be read and returns its answer: the
	// refusal, or the outage that kept it from being recorded.
	Refuse(ctx context.Context, tenantID int64, requestRef string, refusal error) error
}

// JobsDeps are the dependencies of the pipeline jobs API.
type JobsDeps struct {
	// Jobs is nil when the server runs no pipeline; the routes then answer 404.
	Jobs JobService
}

// mountJobs adds the jobs API: POST /api/v1/jobs and GET /api/v1/jobs/{id}.
func (s *Server) mountJobs(r chi.Router) {
	r.With(s.shedder.limit, s.requireToken, s.share.limit(s.refuseJob)).Post("/api/v1/jobs", s.handleSubmitJob)
	r.With(s.shedder.limit, s.requireToken, s.share.limit(nil)).Get("/api/v1/jobs/{id}", s.handleGetJob)
}

// jobBody is the JSON of POST /api/v1/jobs.
type jobBody struct {
	Document struct {
		Text string `json:"text"`
		Hash string `json:"hash"`
		Ref  string `json:"ref"`
	} `json:"document"`
	Pipeline      string `json:"pipeline"`
	PromptVersion string `json:"prompt_version"`
	ModelProfile  string `json:"model_profile"`
	RequestRef    string `json:"request_ref"`
}

// jobAccepted is the answer of POST /api/v1/jobs.
type jobAccepted struct {
	JobID    string `json:"job_id"`
	Status   string `json:"status"`
	DedupKey string `json:"dedup_key"`
}

// handleSubmitJob runs a job once per Idempotency-Key: the first request answers 202 with a
// new job, a repeat answers 200 with the same job and Idempotent-Replayed, the same key with
// another body answers 422.
func (s *Server) handleSubmitJob(w http.ResponseWriter, r *http.Request) {
	if s.Jobs == nil {
		s.Error(w, r, ops.Errorf(ops.ENOTFOUND, "This server runs no pipeline jobs."))
		return
	}
	res, err := s.submitJob(w, r)
	if err != nil {
		// A submission never calls the provider itself: its workers do, once it is recorded.
		s.Error(w, r, ops.NothingSent(err, "Submit it again with the same Idempotency-Key in a few seconds: it makes one job however often it is sent."))
		return
	}
	j := res.Job
	w.Header().Set("Location", "/api/v1/jobs/"+j.ID)
	status := http.StatusAccepted
	if !res.Created {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	}
	s.writeJSON(w, r, status, jobAccepted{JobID: j.ID, Status: string(j.Status), DedupKey: j.DedupKey})
}

// submitJob reads a job request and submits it. A request refused here, before the service
// reads it, is recorded as the service records its own refusals (ops rule 8).
func (s *Server) submitJob(w http.ResponseWriter, r *http.Request) (jobs.Submitted, error) {
	tenant := tenantFrom(r.Context())
	tenantID := tenant.ID
	var b jobBody
	err := decodeJSON(w, r, &b)
	raw, present := idempotencyKey(r)
	key, kerr := llm.ParseKey(raw, present, true)
	if err == nil {
		err = kerr
	}
	ref, rerr := requestRef(r, b.RequestRef)
	if err == nil {
		err = rerr
	}
	if err != nil {
		return jobs.Submitted{}, s.Jobs.Refuse(r.Context(), tenantID, ops.CleanRef(ref), err)
	}
	reqlog.Set(r.Context(), reqlog.KeyHash, reqlog.HashKey(key))
	return s.Jobs.Submit(r.Context(), jobs.Submission{
		TenantID: tenantID, IdempotencyKey: key, RequestRef: ref,
		Document: jobs.Document{Text: b.Document.Text, Hash: b.Document.Hash, Ref: b.Document.Ref},
		Pipeline: b.Pipeline, PromptVersion: b.PromptVersion, ModelProfile: b.ModelProfile,
		LLMBudgetMicros: tenant.LLMBudgetMicros,
	})
}

// jobView is the answer of GET /api/v1/jobs/{id}.
type jobView struct {
	JobID              string           `json:"job_id"`
	Status             string           `json:"status"`
	DedupKey           string           `json:"dedup_key"`
	IdempotencyKey     string           `json:"idempotency_key"`
	RequestRef         string           `json:"request_ref,omitempty"`
	Pipeline           string           `json:"pipeline"`
	PromptVersion      string           `json:"prompt_version"`
	ModelProfile       string           `json:"model_profile"`
	DocumentHash       string           `json:"document_hash"`
	DocumentRef        string           `json:"document_ref,omitempty"`
	OperationID        string           `json:"operation_id,omitempty"`
	Attempts           int              `json:"attempts"`
	PossibleDuplicates int              `json:"possible_duplicates"`
	CostMicros         int64            `json:"cost_micros"`
	Budget             jobBudget        `json:"budget"`
	Error              *jobError        `json:"error,omitempty"`
	Result             json.RawMessage  `json:"result,omitempty"`
	Checkpoints        []checkpointView `json:"checkpoints"`
	CreatedAt          time.Time        `json:"created_at"`
	UpdatedAt          time.Time        `json:"updated_at"`
	PublishedAt        *time.Time       `json:"published_at,omitempty"`
}

type jobBudget struct {
	MaxAttempts   int       `json:"max_attempts"`
	MaxCostMicros int64     `json:"max_cost_micros,omitempty"`
	Deadline      time.Time `json:"deadline"`
}

type jobError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type checkpointView struct {
	Stage       string          `json:"stage"`
	Status      string          `json:"status"`
	InputHash   string          `json:"input_hash"`
	CodeVersion string          `json:"code_version"`
	Attempt     int             `json:"attempt"`
	Result      json.RawMessage `json:"result,omitempty"`
	At          time.Time       `json:"at"`
}

// handleGetJob shows a job of the caller's tenant: status, checkpoints and result.
func (s *Server) handleGetJob(w http.ResponseWriter, r *http.Request) {
	if s.Jobs == nil {
		s.Error(w, r, ops.Errorf(ops.ENOTFOUND, "This server runs no pipeline jobs."))
		return
	}
	j, cps, err := s.Jobs.Get(r.Context(), tenantFrom(r.Context()).ID, chi.URLParam(r, "id"))
	if err != nil {
		s.Error(w, r, err)
		return
	}
	v := jobView{JobID: j.ID, Status: string(j.Status), DedupKey: j.DedupKey, IdempotencyKey: j.IdempotencyKey, RequestRef: j.RequestRef,
		Pipeline: j.Pipeline, PromptVersion: j.PromptVersion, ModelProfile: j.ModelProfile, DocumentHash: j.DocumentHash,
		DocumentRef: j.DocumentRef, OperationID: j.OperationID, Attempts: j.LLMAttempts, PossibleDuplicates: j.PossibleDuplicates,
		CostMicros: j.CostMicros, Budget: jobBudget{MaxAttempts: j.MaxAttempts, MaxCostMicros: j.MaxCostMicros, Deadline: j.Deadline},
		Result: j.Result, Checkpoints: []checkpointView{}, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, PublishedAt: j.PublishedAt}
	if j.ErrorCode != "" {
		v.Error = &jobError{Code: j.ErrorCode, Message: j.ErrorMessage}
	}
	for _, c := range cps {
		cv := checkpointView{Stage: string(c.Stage), Status: c.Status, InputHash: c.InputHash, CodeVersion: c.CodeVersion,
			Attempt: c.Attempt, At: c.UpdatedAt}
		// The document's text and chunks stay out of the answer: the client has them.
		if c.Stage != jobs.StageTextExtracted && c.Stage != jobs.StageChunksReady {
			cv.Result = c.Result
		}
		v.Checkpoints = append(v.Checkpoints, cv)
	}
	s.writeJSON(w, r, http.StatusOK, v)
}
