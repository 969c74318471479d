// Package reconstore holds the reconciler's statements: the provider charges it records and
// matches, the runs of each provider's reconciler, the LLM usage reports and what was sent
// to compare them with, and the exception queue's reads and changes with their audit rows.
// It implements recon.Store and recon.ExceptionStore on the pool of ops/pg, whose
// RecordFinding it records findings through, as the ledger's store does when a refund fails
// after it succeeded. The counts and rollups are ops/pg/rollupstore's.
package reconstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/recon"
)

var (
	_ recon.Store          = (*Store)(nil)
	_ recon.ExceptionStore = (*Store)(nil)
)

// Store is the reconciler's store on db's pool.
type Store struct{ db *pg.DB }

// New returns the reconciler's store on db.
func New(db *pg.DB) *Store { return &Store{db: db} }

// RecordFinding implements recon.Store with the statements of ops/pg, which the ledger's
// store records its own finding through as well (a refund that failed after it succeeded):
// one exception per kind, provider and ref, whoever saw it. It checks the kind, chooses the
// kind's severity when the finding names none, and reads the exception back in the
// transaction that recorded it.
func (s *Store) RecordFinding(ctx context.Context, f recon.Finding) (*recon.Exception, bool, error) {
	if !f.Kind.Valid() {
		return nil, false, ops.Errorf(ops.EINVALID, "Unknown exception kind %q.", f.Kind)
	}
	sev := f.Severity
	if !sev.Valid() {
		sev = recon.DefaultSeverity(f.Kind)
	}
	var out *recon.Exception
	var created bool
	err := pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		id, isNew, err := pg.RecordFinding(ctx, tx, pg.Finding{Kind: string(f.Kind), Provider: f.Provider, Ref: f.Ref,
			TenantID: f.TenantID, OperationID: f.OperationID, ChargeRefs: f.ChargeRefs, Severity: string(sev),
			Resolved: f.Resolved, Note: f.Note, Summary: f.Summary, AmountCents: f.AmountCents, Currency: f.Currency,
			Details: f.Details, Actor: f.Actor, At: f.At})
		if err != nil {
			return err
		}
		created = isNew
		out, err = scanException(tx.QueryRow(ctx, `SELECT `+exCols+` FROM recon_exceptions e WHERE e.id = $1`, id))
		return err
	})
	if err != nil {
		return nil, false, pg.Interpret(err, "record finding")
	}
	return out, created, nil
}

// exCols are the recon_exceptions columns, over alias e, that scanException reads.
const exCols = `e.id, e.kind, e.provider, e.ref, coalesce(e.tenant_id, 0), coalesce(e.operation_id::text, ''), e.charge_refs,
	e.severity, e.status, e.assignee, e.note, e.summary, e.amount_cents, e.currency, e.details, e.version, e.seen_count,
	e.first_seen_at, e.last_seen_at, e.updated_at, e.resolved_at, e.resolved_by`

func scanException(row pgx.Row) (*recon.Exception, error) {
	var e recon.Exception
	var kind, sev, status string
	err := row.Scan(&e.ID, &kind, &e.Provider, &e.Ref, &e.TenantID, &e.OperationID, &e.ChargeRefs, &sev, &status,
		&e.Assignee, &e.Note, &e.Summary, &e.AmountCents, &e.Currency, &e.Details, &e.Version, &e.SeenCount,
		&e.FirstSeenAt, &e.LastSeenAt, &e.UpdatedAt, &e.ResolvedAt, &e.ResolvedBy)
	if err != nil {
		return nil, err
	}
	e.Kind, e.Severity, e.Status = recon.ExceptionKind(kind), recon.Severity(sev), recon.ExceptionStatus(status)
	return &e, nil
}

// exceptionState is what the audit log keeps of an exception before and after a change,
// worded as ops/pg words it when it records a finding.
func exceptionState(e *recon.Exception) []byte {
	return pg.ExceptionState{Assignee: e.Assignee, ChargeRefs: e.ChargeRefs, Severity: string(e.Severity),
		Status: string(e.Status), Version: e.Version}.JSON()
}

// stripeProvider is the provider name of Stripe operations, whose charges must be of the
// tenant's connected account to match.
const stripeProvider = "stripe"

// KnownCharges implements recon.Store.
func (s *Store) KnownCharges(ctx context.Context, provider string, refs []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(refs) == 0 {
		return out, nil
	}
	rows, err := s.db.Pool.Query(ctx, `SELECT charge_ref FROM provider_charges WHERE provider = $1 AND charge_ref = ANY($2)`, provider, refs)
	if err != nil {
		return nil, pg.Interpret(err, "read known charges")
	}
	refsFound, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, pg.Interpret(err, "read known charges")
	}
	for _, r := range refsFound {
		out[r] = true
	}
	return out, nil
}

const chargeCols = `pc.id, coalesce(pc.tenant_id, 0), pc.provider, pc.charge_ref, coalesce(pc.operation_id::text, ''),
	pc.amount_cents, pc.currency, pc.status, pc.charged_at, pc.seen_at, pc.raw`

func scanCharge(row pgx.CollectableRow) (recon.ProviderCharge, error) {
	var c recon.ProviderCharge
	err := row.Scan(&c.ID, &c.TenantID, &c.Provider, &c.Ref, &c.OperationID, &c.AmountCents, &c.Currency, &c.Status,
		&c.ChargedAt, &c.SeenAt, &c.Raw)
	return c, err
}

// MarkReconciled implements recon.Store.
func (s *Store) MarkReconciled(ctx context.Context, provider string, refs []string, at time.Time) error {
	if len(refs) == 0 {
		return nil
	}
	_, err := s.db.Pool.Exec(ctx, `UPDATE provider_charges SET reconciled_at = $3 WHERE provider = $1 AND charge_ref = ANY($2)`,
		provider, refs, at)
	return pg.Interpret(err, "mark charges reconciled")
}

// DoubleCharges implements recon.Store. Each ref and each operation it touches is one index
// probe: written as a join on a list (= ANY), the planner read the whole table twice for a
// list of thousands, half a second a call at a million charges.
func (s *Store) DoubleCharges(ctx context.Context, provider string, refs []string) ([]recon.DoubleCharge, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	rows, err := s.db.Pool.Query(ctx, `
WITH touched AS (
	SELECT DISTINCT pc.operation_id FROM unnest(@refs::text[]) AS r(ref)
	CROSS JOIN LATERAL (SELECT operation_id FROM provider_charges
		WHERE provider = @provider AND charge_ref = r.ref AND operation_id IS NOT NULL) pc
), doubled AS (
	SELECT t.operation_id FROM touched t
	WHERE (SELECT count(*) FROM (SELECT 1 FROM provider_charges pc WHERE pc.operation_id = t.operation_id
		AND pc.status IN `+pg.ChargedStatuses+` LIMIT 2) two) > 1
)
SELECT `+chargeCols+` FROM doubled d CROSS JOIN LATERAL (SELECT * FROM provider_charges
	WHERE operation_id = d.operation_id AND status IN `+pg.ChargedStatuses+`) pc
ORDER BY pc.operation_id, pc.charged_at, pc.id`, pgx.NamedArgs{"provider": provider, "refs": refs})
	if err != nil {
		return nil, pg.Interpret(err, "find double charges")
	}
	charges, err := pgx.CollectRows(rows, scanCharge)
	if err != nil {
		return nil, pg.Interpret(err, "find double charges")
	}
	var out []recon.DoubleCharge
	for _, c := range charges {
		if len(out) == 0 || out[len(out)-1].OperationID != c.OperationID {
			out = append(out, recon.DoubleCharge{OperationID: c.OperationID, TenantID: c.TenantID})
		}
		out[len(out)-1].Charges = append(out[len(out)-1].Charges, c)
	}
	return out, nil
}

// MissingCandidates implements recon.Store.
func (s *Store) MissingCandidates(ctx context.Context, provider string, w recon.Window, limit int) ([]*ops.Operation, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT `+pg.OpCols+` FROM operations o
WHERE o.created_at >= @from AND o.created_at < @to AND o.provider = @provider AND o.status = 'succeeded'
	AND NOT EXISTS (SELECT 1 FROM provider_charges pc WHERE pc.operation_id = o.id AND pc.status IN `+pg.ChargedStatuses+`
		AND pc.reconciled_at IS NOT NULL)
	AND NOT EXISTS (SELECT 1 FROM provider_charges pc WHERE o.provider_ref <> '' AND pc.provider = o.provider
		AND pc.charge_ref = o.provider_ref AND pc.status IN `+pg.ChargedStatuses+` AND pc.reconciled_at IS NOT NULL)
	AND NOT EXISTS (SELECT 1 FROM recon_exceptions e WHERE e.operation_id = o.id AND e.kind = 'missing_charge')
ORDER BY o.created_at LIMIT @limit`, pgx.NamedArgs{"from": w.From, "to": w.To, "provider": provider, "limit": limit})
	if err != nil {
		return nil, pg.Interpret(err, "find missing charge candidates")
	}
	return pg.CollectOps(rows)
}

// ReconRun implements recon.Store.
func (s *Store) ReconRun(ctx context.Context, name string) (recon.Lease, error) {
	l := recon.Lease{Name: name}
	err := s.db.Pool.QueryRow(ctx, `SELECT done_until, last_run_at, last_report FROM recon_runs WHERE name = $1`, name).
		Scan(&l.DoneUntil, &l.LastRunAt, &l.LastReport)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, nil
	}
	return l, pg.Interpret(err, "read the reconciler's progress")
}

// RecordRun implements recon.Store in one statement, fenced by the lease's token: a run that
// lost its lease records nothing, and never moves the watermark past its successor's.
func (s *Store) RecordRun(ctx context.Context, l ops.Lease, now time.Time, doneUntil *time.Time, report json.RawMessage) (bool, error) {
	tag, err := s.db.Pool.Exec(ctx, `
INSERT INTO recon_runs AS r (name, done_until, last_run_at, last_report)
SELECT @name::text, @done::timestamptz, @now::timestamptz, @report::jsonb FROM leases
WHERE name = @name AND owner = @owner AND token = @token AND expires_at > '-infinity'
ON CONFLICT (name) DO UPDATE SET last_run_at = excluded.last_run_at,
	last_report = coalesce(excluded.last_report, r.last_report),
	done_until = CASE WHEN excluded.done_until IS NULL THEN r.done_until ELSE greatest(r.done_until, excluded.done_until) END`,
		pgx.NamedArgs{"name": l.Name, "owner": l.Owner, "token": l.Token, "now": now, "done": doneUntil, "report": pg.JSONOrNil(report)})
	if err != nil {
		return false, pg.Interpret(err, "record the reconciler's run")
	}
	return tag.RowsAffected() == 1, nil
}

// Leases returns every reconciler's progress and who holds its lease, for the pages to say
// when each last ran and whether it runs now.
func (s *Store) Leases(ctx context.Context) ([]recon.Lease, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT coalesce(r.name, l.name), coalesce(l.owner, ''),
	CASE WHEN l.expires_at > '-infinity' THEN l.expires_at END, r.done_until, r.last_run_at, r.last_report
FROM recon_runs r FULL JOIN (SELECT * FROM leases WHERE name LIKE 'reconcile:%') l ON l.name = r.name
ORDER BY 1`)
	if err != nil {
		return nil, pg.Interpret(err, "list leases")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (recon.Lease, error) {
		var l recon.Lease
		err := r.Scan(&l.Name, &l.Owner, &l.Until, &l.DoneUntil, &l.LastRunAt, &l.LastReport)
		return l, err
	})
	return out, pg.Interpret(err, "list leases")
}

// RecordUsage implements recon.Store.
func (s *Store) RecordUsage(ctx context.Context, provider string, rows []recon.UsageRow, seenAt time.Time) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	n := len(rows)
	starts, secs := make([]time.Time, n), make([]int32, n)
	keys, models := make([]string, n), make([]string, n)
	reqs, in, out := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, r := range rows {
		starts[i], secs[i], keys[i], models[i] = r.Start, int32(r.Width/time.Second), r.APIKeyID, r.Model
		reqs[i], in[i], out[i] = r.Requests, r.InputTokens, r.OutputTokens
	}
	var created int
	err := s.db.Pool.QueryRow(ctx, `
WITH up AS (
	INSERT INTO llm_usage AS u (provider, bucket_start, bucket_seconds, api_key_id, model, requests, input_tokens, output_tokens, seen_at)
	SELECT @provider, s, w, k, m, r, i, o, @seen
	FROM unnest(@starts::timestamptz[], @secs::int[], @keys::text[], @models::text[], @reqs::bigint[], @in::bigint[], @out::bigint[])
		AS x(s, w, k, m, r, i, o)
	ON CONFLICT (provider, bucket_seconds, bucket_start, api_key_id, model) DO UPDATE
	SET requests = excluded.requests, input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
		seen_at = excluded.seen_at
	RETURNING (xmax = 0) AS created
)
SELECT count(*) FILTER (WHERE created) FROM up`, pgx.NamedArgs{"provider": provider, "seen": seenAt, "starts": starts,
		"secs": secs, "keys": keys, "models": models, "reqs": reqs, "in": in, "out": out}).Scan(&created)
	return created, pg.Interpret(err, "record usage")
}

// SentToLLM implements recon.Store. The model and the API are read from the operation's
// row, which keeps them from its opening, so that a call whose request was purged is still
// counted against its model and its API's report; the gateway route is the API's.
func (s *Store) SentToLLM(ctx context.Context, provider string, w recon.Window, width time.Duration) ([]recon.SentRow, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT CASE WHEN o.api = '' THEN '' ELSE '/v1/' || replace(o.api, '_', '/') END AS r,
	date_bin(make_interval(secs => @secs), a.started_at, `+pg.BinOrigin+`) AS b, o.model AS m,
	count(*) FILTER (WHERE a.outcome IS DISTINCT FROM 'not_sent'),
	count(*) FILTER (WHERE a.outcome = 'ok' OR x.found),
	count(*) FILTER (WHERE `+uncertainAttempt+` AND NOT x.found)
FROM attempts a JOIN operations o ON o.id = a.operation_id
CROSS JOIN LATERAL (SELECT `+uncertainAttempt+`
	AND NOT EXISTS (SELECT 1 FROM attempts k WHERE k.operation_id = a.operation_id AND k.outcome = 'ok')
	AND (SELECT count(*) FROM attempts u WHERE u.operation_id = a.operation_id AND u.n <= a.n
		AND (u.outcome IS NULL OR u.outcome IN ('timeout', 'server_error', 'key_in_use')))
		<= (SELECT count(*) FROM provider_charges pc WHERE pc.operation_id = a.operation_id AND pc.status IN `+pg.ChargedStatuses+`)
	AS found) x
WHERE a.started_at >= @from AND a.started_at < @to AND o.provider = @provider
GROUP BY 1, 2, 3 ORDER BY 2, 1, 3`, pgx.NamedArgs{"secs": width.Seconds(), "from": w.From, "to": w.To, "provider": provider})
	if err != nil {
		return nil, pg.Interpret(err, "count attempts sent")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (recon.SentRow, error) {
		var s recon.SentRow
		err := r.Scan(&s.Route, &s.Start, &s.Model, &s.Sent, &s.OK, &s.Uncertain)
		s.Start = s.Start.UTC()
		return s, err
	})
	return out, pg.Interpret(err, "count attempts sent")
}

// uncertainAttempt holds for an attempt a of SentToLLM whose outcome is not known. Such an
// attempt counts as answered when a completion the provider stored explains it: its
// operation has no answered attempt, and lookups recorded as many charges for it as it has
// uncertain attempts up to this one.
const uncertainAttempt = `(a.outcome IS NULL OR a.outcome IN ('timeout', 'server_error', 'key_in_use'))`

// sharedCharge says whether another charge names the operation op of the charge ref: a
// double charge to look at. It is asked only of the charges a batch records or finds done,
// one index probe each.
func sharedCharge(op, ref string) string {
	return `EXISTS (SELECT 1 FROM provider_charges p2 WHERE p2.operation_id = ` + op + `
	AND p2.charge_ref <> ` + ref + ` AND p2.status IN ` + pg.ChargedStatuses + `)`
}

// RecordMatchedCharges implements recon.Store in one statement per call: the records are
// sent as arrays, matched against their operations by primary key, and recorded unless a
// row for the charge already says something else (another operation, another status), which
// the ledger must see. The listing's copy of the record is not kept: the operation holds the
// provider's own answer as its evidence, and a kilobyte per charge would be most of a
// million-refund run's writes. A record from another account than the one its operation
// was sent to (its tenant's current one for an operation opened before that was recorded)
// is never matched: the ledger's guard on connected accounts decides what it is. A ref listed twice is
// matched once; its repeat goes to the ledger.
func (s *Store) RecordMatchedCharges(ctx context.Context, provider string, recs []ops.ProviderRecord, seenAt time.Time) (map[string]recon.MatchedCharge, error) {
	out := map[string]recon.MatchedCharge{}
	if len(recs) == 0 {
		return out, nil
	}
	n := len(recs)
	refs, opIDs, currencies, statuses, accounts := make([]string, n), make([]*string, n), make([]string, n), make([]string, n), make([]string, n)
	amounts, created := make([]int64, n), make([]time.Time, n)
	dup := make(map[string]bool, n)
	for i, r := range recs {
		if dup[r.Ref] {
			r.OperationID = "" // matches no operation, so the statement never names a charge twice
		}
		dup[r.Ref] = true
		refs[i], amounts[i], currencies[i], statuses[i], accounts[i] = r.Ref, r.AmountCents, r.Currency, r.Status, r.Account
		if id, ok := pg.CanonicalID(r.OperationID); ok {
			opIDs[i] = &id
		}
		created[i] = r.Created
		if created[i].IsZero() {
			created[i] = seenAt
		}
	}
	rows, err := s.db.Pool.Query(ctx, `
WITH r AS (
	SELECT * FROM unnest(@refs::text[], @ops::uuid[], @amounts::bigint[], @currencies::text[], @statuses::text[],
		@created::timestamptz[], @accounts::text[]) AS r(ref, op_id, amount, currency, status, created, account)
), m AS (
	-- done: a charge a run reconciled before, unchanged: nothing to write, so a window read
	-- again costs reads only. A charge the write path recorded is only marked reconciled:
	-- seen_at moves when Settle learns something of a charge, and the rollups and the charge
	-- alerts count what moved it.
	SELECT r.*, o.tenant_id, coalesce(pc.operation_id = r.op_id AND pc.status = r.status AND pc.reconciled_at IS NOT NULL,
		false) AS done
	FROM r
	JOIN operations o ON o.id = r.op_id
	JOIN tenants t ON t.id = o.tenant_id
	LEFT JOIN provider_charges pc ON pc.provider = @provider AND pc.charge_ref = r.ref
	WHERE o.status = 'succeeded' AND o.provider = @provider AND o.provider_ref = r.ref
		AND r.status IN `+pg.ChargedStatuses+`
		AND r.account = CASE WHEN @provider = '`+stripeProvider+`' THEN coalesce(o.stripe_account, t.stripe_account, '') ELSE '' END
), ins AS (
	INSERT INTO provider_charges (tenant_id, provider, charge_ref, operation_id, amount_cents, currency, status, charged_at,
		seen_at, reconciled_at)
	SELECT tenant_id, @provider, ref, op_id, amount, currency, status, created, @seen, @seen FROM m WHERE NOT done
		-- The operation is locked as a foreign key would lock it (provider_charges keeps none
		-- into operations, migration 00071): a charge matched while the retention removes
		-- its operation waits for the removal, and is then not recorded.
		AND EXISTS (SELECT 1 FROM operations l WHERE l.id = m.op_id FOR KEY SHARE)
	ON CONFLICT (provider, charge_ref) DO UPDATE SET reconciled_at = excluded.reconciled_at
		WHERE provider_charges.operation_id = excluded.operation_id AND provider_charges.status = excluded.status
	-- xmax is 0 on a row this statement inserted, and set on one it updated.
	RETURNING charge_ref, xmax <> 0 AS known, `+sharedCharge("provider_charges.operation_id", "provider_charges.charge_ref")+`
)
SELECT ref, true, `+sharedCharge("m.op_id", "m.ref")+` FROM m WHERE done UNION ALL SELECT * FROM ins`, pgx.NamedArgs{"refs": refs, "ops": opIDs, "amounts": amounts, "currencies": currencies,
		"statuses": statuses, "created": created, "accounts": accounts, "provider": provider, "seen": seenAt})
	if err != nil {
		return nil, pg.Interpret(err, "record matched charges")
	}
	var ref string
	var m recon.MatchedCharge
	_, err = pgx.ForEachRow(rows, []any{&ref, &m.Known, &m.Shared}, func() error {
		out[ref] = m
		return nil
	})
	if err != nil {
		return nil, pg.Interpret(err, "record matched charges")
	}
	return out, nil
}

// UnknownLLM implements recon.Store: the LLM operations of a provider left unknown or
// expired since before, newest first, through operations_open_age_idx (the unknown backlog
// is small).
func (s *Store) UnknownLLM(ctx context.Context, provider string, before time.Time, limit int) ([]*ops.Operation, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT `+pg.OpCols+` FROM operations o
WHERE o.status IN ('unknown', 'expired') AND o.kind IN ('llm_call', 'llm_job') AND o.provider = @provider
	AND o.updated_at <= @before
ORDER BY o.updated_at DESC, o.id LIMIT @limit`, pgx.NamedArgs{"provider": provider, "before": before, "limit": limit})
	if err != nil {
		return nil, pg.Interpret(err, "find unknown LLM operations")
	}
	return pg.CollectOps(rows)
}

// SentPrompts implements recon.Store. The model is the one the provider's answer named (the
// attempt's, else the operation's usage), else the one the request asked for, which the
// operation keeps on its row past the purge of its request; the prompt's
// size is the attempt's own usage, else the operation's, which is the usage of the attempt
// that answered the same request. Only uncertain attempts come one by one: the rest are
// summed per bucket, model and outcome, so a day of traffic is a few rows a minute.
func (s *Store) SentPrompts(ctx context.Context, provider string, w recon.Window, width time.Duration) ([]recon.SentPrompt, error) {
	rows, err := s.db.Pool.Query(ctx, `
WITH sent AS (
	SELECT date_bin(make_interval(secs => @secs), a.started_at, `+pg.BinOrigin+`) AS b,
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
		return nil, pg.Interpret(err, "list the prompts sent")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (recon.SentPrompt, error) {
		var s recon.SentPrompt
		var outcome, status string
		err := r.Scan(&s.Start, &s.Model, &s.OperationID, &s.TenantID, &s.Attempt, &outcome, &status, &s.PromptTokens, &s.Count, &s.Unsized)
		s.Start, s.Outcome, s.Status = s.Start.UTC(), ops.Outcome(outcome), ops.Status(status)
		return s, err
	})
	return out, pg.Interpret(err, "list the prompts sent")
}
