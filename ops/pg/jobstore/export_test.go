package jobstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/jobs"
)

// JobsForOperationPlans returns the plans of JobsForOperation's two reads, for the test
// that checks indexes serve them.
func (s *Store) JobsForOperationPlans(ctx context.Context, opID, dedupKey string, jobIDs []string) (map[string]string, error) {
	plans := map[string]string{}
	for name, q := range map[string]struct {
		sql  string
		args []any
	}{
		"jobs":        {operationJobsQuery, []any{opID, jobs.IntentKey(""), jobs.MaxOperationJobs + 1}},
		"checkpoints": {operationCheckpointsQuery, []any{dedupKey, jobIDs, maxOperationCheckpoints}},
	} {
		rows, err := s.db.Pool.Query(ctx, "EXPLAIN "+q.sql, q.args...)
		if err != nil {
			return nil, fmt.Errorf("explain %s: %w", name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("explain %s: %w", name, err)
		}
		plans[name] = strings.Join(lines, "\n")
	}
	return plans, nil
}

// ClaimPlan returns the plan of ClaimJobs' statement with the sizes it ran with, executed
// in a transaction that is rolled back, for the test that checks a claim's cost does not
// grow with a tenant's queue.
func (s *Store) ClaimPlan(ctx context.Context, now time.Time, limit int) (string, error) {
	tx, err := s.db.Pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+claimQuery, claimArgs("plan", now, now.Add(time.Minute), limit))
	if err != nil {
		return "", fmt.Errorf("explain claim: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("explain claim: %w", err)
	}
	return strings.Join(lines, "\n"), nil
}
