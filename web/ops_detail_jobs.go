package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/views"
)

// JobViewer reads the pipeline jobs that use an llm_job operation (pg.DB).
type JobViewer interface {
	// JobsForOperation returns the jobs whose generation is opID, oldest first, each with a
	// checkpoint (or nil) for every stage in jobs.Stages, and at most jobs.MaxOperationJobs+1.
	JobsForOperation(ctx context.Context, opID string) ([]jobs.OperationJob, error)
}

const (
	// shortHash is how many hex digits of an input hash the page shows: enough to tell two
	// inputs apart by eye; the full hash is in the cell's title.
	shortHash = 12
	// shortResult bounds a checkpoint's result on the page; the API has the whole of it.
	shortResult = 160
)

// opJobs builds the jobs section of an llm_job operation. A failed read is logged and shown
// in the section instead of failing the page: the operation itself is what a person came to
// settle, and the rest of the page was read fine.
func (s *Server) opJobs(r *http.Request, op *ops.Operation, tenants []*ops.Tenant) *views.OpJobs {
	if s.JobViews == nil {
		return &views.OpJobs{Unavailable: "Pipeline jobs are not configured on this server."}
	}
	list, err := s.JobViews.JobsForOperation(r.Context(), op.ID)
	if err != nil {
		s.Logger.ErrorContext(r.Context(), "read jobs of operation", "op", op.ID, "err", err)
		return &views.OpJobs{Unavailable: "The jobs of this operation could not be read just now; reload the page to try again."}
	}
	out := &views.OpJobs{}
	if len(list) > jobs.MaxOperationJobs {
		list = list[:jobs.MaxOperationJobs]
		out.More = fmt.Sprintf("Showing the first %d jobs; more use this operation.", jobs.MaxOperationJobs)
	}
	for _, oj := range list {
		out.Rows = append(out.Rows, opJobRow(oj, tenantName(tenants, oj.Job.TenantID)))
	}
	return out
}

func opJobRow(oj jobs.OperationJob, tenant string) views.OpJobRow {
	j := oj.Job
	row := views.OpJobRow{ID: j.ID, Tenant: tenant, Status: string(j.Status), IdempotencyKey: j.IdempotencyKey,
		Pipeline: j.Pipeline, PromptVersion: j.PromptVersion, ModelProfile: j.ModelProfile, DedupKey: j.DedupKey,
		Created: formatTime(j.CreatedAt), ErrorText: joinNonEmpty(j.ErrorCode, j.ErrorMessage)}
	if j.PublishedAt != nil {
		row.Published = formatTime(*j.PublishedAt)
	}
	for i, stage := range jobs.Stages {
		cell := views.JobCheckpointCell{Stage: string(stage)}
		if i < len(oj.Checkpoints) && oj.Checkpoints[i] != nil {
			c := oj.Checkpoints[i]
			cell.Reached, cell.InputHashFull, cell.CodeVersion, cell.Status = true, c.InputHash, c.CodeVersion, c.Status
			cell.InputHash = c.InputHash
			if len(cell.InputHash) > shortHash {
				cell.InputHash = truncate(cell.InputHash, shortHash) + "…"
			}
			cell.Attempt = strconv.Itoa(c.Attempt)
			cell.Updated = formatTime(c.UpdatedAt)
			if len(c.Result) > 0 {
				cell.Result = string(c.Result)
				if len(cell.Result) > shortResult {
					cell.Result = truncate(cell.Result, shortResult) + " …"
				}
			}
		}
		row.Checkpoints = append(row.Checkpoints, cell)
	}
	return row
}
