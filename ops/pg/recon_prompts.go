package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
)

// SentPrompts implements recon.Store. The model is the one the provider's answer named (the
// attempt's, else the operation's usage), else the one the request asked for, which the
// operation keeps on its row past the purge of its request; the prompt's
// size is the attempt's own usage, else the operation's, which is the usage of the attempt
// that answered the same request. Only uncertain attempts come one by one: the rest are
// summed per bucket, model and outcome, so a day of traffic is a few rows a minute.
func (db *DB) SentPrompts(ctx context.Context, provider string, w recon.Window, width time.Duration) ([]recon.SentPrompt, error) {
	rows, err := db.Pool.Query(ctx, `
WITH sent AS (
	SELECT date_bin(make_interval(secs => @secs), a.started_at, `+binOrigin+`) AS b,
		coalesce(a.usage->>'model', o.usage->>'model', o.model) AS m,
		o.id::text AS id, o.tenant_id AS tenant, a.n, coalesce(a.outcome, '') AS outcome, o.status,
		coalesce((a.usage->>'prompt_tokens')::bigint, (o.usage->>'prompt_tokens')::bigint, 0) AS prompt,
		a.outcome IS NULL OR a.outcome IN ('timeout', 'server_error') AS uncertain
	FROM attempts a JOIN operations o ON o.id = a.operation_id
	WHERE a.started_at >= @from AND a.started_at < @to AND o.provider = @provider
		AND a.outcome IS DISTINCT FROM 'not_sent'
)
SELECT b, m, id, tenant, n, outcome, status, prompt, 1, (prompt = 0)::int FROM sent WHERE uncertain
UNION ALL
SELECT b, m, '', 0, 0, outcome, '', sum(prompt), count(*), count(*) FILTER (WHERE prompt = 0)
FROM sent WHERE NOT uncertain GROUP BY b, m, outcome
ORDER BY 1, 2, 3, 5`, pgx.NamedArgs{"secs": width.Seconds(), "from": w.From, "to": w.To, "provider": provider})
	if err != nil {
		return nil, interpret(err, "list the prompts sent")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (recon.SentPrompt, error) {
		var s recon.SentPrompt
		var outcome, status string
		err := r.Scan(&s.Start, &s.Model, &s.OperationID, &s.TenantID, &s.Attempt, &outcome, &status, &s.PromptTokens, &s.Count, &s.Unsized)
		s.Start, s.Outcome, s.Status = s.Start.UTC(), ops.Outcome(outcome), ops.Status(status)
		return s, err
	})
	return out, interpret(err, "list the prompts sent")
}
