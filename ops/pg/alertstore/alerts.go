// Package alertstore holds the alert evaluator's statements: its tables (alert_instances,
// alert_history, alert_rule_status and alert_outbox) and the counts of the ledger's tables
// that its rules and /metrics read. It implements the interfaces of package alerts.
package alertstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

var (
	_ alerts.Source        = (*Store)(nil)
	_ alerts.Store         = (*Store)(nil)
	_ alerts.MetricsSource = (*Store)(nil)
	_ outbox.Store         = Outbox{}
)

// Store is the alerts' store on db's pool.
type Store struct {
	db *pg.DB
	// counts counts the windows, paced or not (Paced).
	counts *rollupstore.Store
}

// New returns the alerts' store on db.
func New(db *pg.DB) *Store { return &Store{db: db, counts: rollupstore.New(db)} }

// Paced returns a copy of s whose windows' counts rest pause between two minutes of raw
// rows (rollupstore.Store.Paced): the evaluator's, which runs in the background.
func (s *Store) Paced(pause time.Duration) *Store {
	c := *s
	c.counts = s.counts.Paced(pause)
	return &c
}

// tenantNames maps tenant ids to names; alerts are labelled by name. The table is small.
func (s *Store) tenantNames(ctx context.Context) (map[int64]string, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT id, name FROM tenants`)
	if err != nil {
		return nil, pg.Interpret(err, "list tenants")
	}
	out := map[int64]string{}
	var id int64
	var name string
	_, err = pgx.ForEachRow(rows, []any{&id, &name}, func() error { out[id] = name; return nil })
	return out, pg.Interpret(err, "list tenants")
}

// Counters implements alerts.Source with the reconciliation table's counts (WindowCounts of
// ops/pg/rollupstore): the same recorded rows the managers see, added up over the window
// for each tenant, kind, provider and API (the minutes the rollup job has settled read from
// its rollups, the rest from the raw rows, so a day's window does not count a day of rows
// every pass), the API each operation called as it keeps it (as
// every API label of /metrics does), with the possible duplicates that finished in it. Every
// signal carries its API, so a ratio grouped by API (a resend storm, a timeout rate) is
// measured against that API's attempts alone; a rule that does not group by API adds them
// up again.
func (s *Store) Counters(ctx context.Context, from, to time.Time) ([]alerts.Row, error) {
	out, err := s.counters(ctx, []alerts.Window{{From: from, To: to}}, false)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// CountersAll implements alerts.Source: Counters of each window, read together. The counts
// of all windows come from one snapshot (WindowCountsAll), which counts the raw rows two
// windows share once (those after the rollups' cut, which every window ending now reads),
// and the possible duplicates of all windows from one statement.
func (s *Store) CountersAll(ctx context.Context, windows []alerts.Window) ([][]alerts.Row, error) {
	return s.counters(ctx, windows, false)
}

// counters is CountersAll, with every number counted from the raw rows when raw is set.
func (s *Store) counters(ctx context.Context, windows []alerts.Window, raw bool) ([][]alerts.Row, error) {
	names, err := s.tenantNames(ctx)
	if err != nil {
		return nil, err
	}
	ws := make([]recon.Window, len(windows))
	for i, w := range windows {
		ws[i] = recon.Window{From: w.From, To: w.To}
	}
	var counts [][]recon.MetricsRow
	if raw {
		for _, w := range ws {
			rows, err := s.counts.RawWindowCounts(ctx, w)
			if err != nil {
				return nil, fmt.Errorf("count the window: %w", err)
			}
			counts = append(counts, rows)
		}
	} else if counts, err = s.counts.WindowCountsAll(ctx, ws); err != nil {
		return nil, fmt.Errorf("count the window: %w", err)
	}
	dups, err := s.possibleDuplicates(ctx, windows)
	if err != nil {
		return nil, err
	}
	out := make([][]alerts.Row, len(windows))
	for i := range windows {
		out[i] = alertRows(names, counts[i], dups[i])
	}
	return out, nil
}

// alertRows adds up a window's counts and possible duplicates by tenant, kind, provider and
// API, in the order they first appear.
func alertRows(names map[int64]string, counts []recon.MetricsRow, dups []apiCount) []alerts.Row {
	type key struct {
		tenant        int64
		kind          ops.Kind
		provider, api string
	}
	sums := map[key]*alerts.Row{}
	var order []key
	row := func(k key) *alerts.Row {
		s := sums[k]
		if s == nil {
			s = &alerts.Row{Tenant: names[k.tenant], Kind: string(k.kind), Provider: k.provider, API: k.api,
				Values: map[alerts.Signal]float64{}}
			sums[k] = s
			order = append(order, k)
		}
		return s
	}
	for _, r := range counts {
		addMetrics(row(key{r.TenantID, r.Kind, r.Provider, r.API}).Values, r)
	}
	for _, d := range dups {
		row(key{d.tenant, d.kind, d.provider, d.api}).Values[alerts.PossibleDuplicates] += d.n
	}
	out := make([]alerts.Row, 0, len(order))
	for _, k := range order {
		out = append(out, *sums[k])
	}
	return out
}

// addMetrics adds a rollup row's counts to an alert row's signals.
func addMetrics(v map[alerts.Signal]float64, r recon.MetricsRow) {
	v[alerts.ClientRequests] += float64(r.ClientRequests)
	v[alerts.AdmittedRequests] += float64(r.Admitted())
	v[alerts.DuplicateRequests] += float64(r.Duplicates)
	v[alerts.Replays] += float64(r.Replays)
	v[alerts.Operations] += float64(r.Operations)
	v[alerts.Succeeded] += float64(r.Succeeded)
	v[alerts.Attempts] += float64(r.AttemptsSent)
	v[alerts.Timeouts] += float64(r.Timeouts)
	v[alerts.ProviderCharges] += float64(r.Charges)
	v[alerts.OrphanCharges] += float64(r.Orphans)
	v[alerts.DoubleCharges] += float64(r.DoubleCharges)
	v[alerts.BudgetRefusals] += float64(r.BudgetRefused)
	v[alerts.BudgetTooSmall] += float64(r.BudgetTooSmall)
}

// Backlog implements alerts.Source. Unknown and expired are counted from queue_counts (kept
// by a trigger) and their oldest found by one probe of operations_open_age_idx per group;
// received and in-progress rows are few and counted from their partial indexes, each status
// apart: the received rows on operations_queue_idx, the in-progress ones on
// operations_stalled_idx (migration 00073), which no single "status IN" would pick.
func (s *Store) Backlog(ctx context.Context, now time.Time) ([]alerts.Row, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT q.status, coalesce(t.name, ''), q.kind, q.provider, sum(q.n)::float8,
	coalesce(extract(epoch FROM @now - (
		SELECT o.created_at FROM operations o
		WHERE o.status = q.status AND o.tenant_id = q.tenant_id AND o.kind = q.kind AND o.provider = q.provider
		ORDER BY o.created_at LIMIT 1)), 0)::float8
FROM queue_counts q LEFT JOIN tenants t ON t.id = q.tenant_id
WHERE q.status IN ('unknown', 'expired')
GROUP BY q.status, t.name, q.tenant_id, q.kind, q.provider
HAVING sum(q.n) > 0
UNION ALL
SELECT o.status, coalesce(t.name, ''), o.kind, o.provider, count(*)::float8,
	extract(epoch FROM @now - min(o.created_at))::float8
FROM (SELECT status, tenant_id, kind, provider, created_at FROM operations WHERE status = 'received'
	UNION ALL
	SELECT status, tenant_id, kind, provider, created_at FROM operations WHERE status = 'in_progress') o
	LEFT JOIN tenants t ON t.id = o.tenant_id
GROUP BY o.status, t.name, o.kind, o.provider
UNION ALL
SELECT e.kind, coalesce(t.name, ''), 'refund', e.provider, count(*)::float8, 0::float8
FROM recon_exceptions e LEFT JOIN tenants t ON t.id = e.tenant_id
WHERE e.kind = 'failed_after_success' AND e.status <> 'resolved'
GROUP BY e.kind, t.name, e.provider`, pgx.NamedArgs{"now": now})
	if err != nil {
		return nil, pg.Interpret(err, "read the backlog")
	}
	type key struct{ tenant, kind, provider string }
	sig := map[string][2]alerts.Signal{
		"unknown":     {alerts.UnknownOperations, alerts.OldestUnknown},
		"expired":     {alerts.ExpiredOperations, alerts.OldestExpired},
		"received":    {alerts.ReceivedOperations, alerts.OldestReceived},
		"in_progress": {alerts.InProgressOperations, alerts.OldestInProgress},
		// Open exceptions, not operations: counted, with no age.
		"failed_after_success": {alerts.FailedAfterSuccess, ""},
	}
	byKey := map[key]*alerts.Row{}
	var order []key
	var status, tenant, kind, provider string
	var n, age float64
	_, err = pgx.ForEachRow(rows, []any{&status, &tenant, &kind, &provider, &n, &age}, func() error {
		k := key{tenant, kind, provider}
		r := byKey[k]
		if r == nil {
			r = &alerts.Row{Tenant: tenant, Kind: kind, Provider: provider, Values: map[alerts.Signal]float64{}}
			byKey[k] = r
			order = append(order, k)
		}
		s := sig[status]
		r.Values[s[0]] += n
		if s[1] != "" {
			r.Values[s[1]] = max(r.Values[s[1]], age)
		}
		return nil
	})
	if err != nil {
		return nil, pg.Interpret(err, "read the backlog")
	}
	out := make([]alerts.Row, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out, nil
}

const instanceCols = `key, rule_key, alert, labels, annotations, state, value, active_at, coalesce(fired_at, 'epoch'::timestamptz), last_true_at, since`

func scanInstance(r pgx.CollectableRow) (alerts.Instance, error) {
	var in alerts.Instance
	var state string
	err := r.Scan(&in.Key, &in.RuleKey, &in.Alert, &in.Labels, &in.Annotations, &state, &in.Value, &in.ActiveAt, &in.FiredAt,
		&in.LastTrueAt, &in.Since)
	in.State = alerts.State(state)
	if in.FiredAt.Equal(time.Unix(0, 0)) {
		in.FiredAt = time.Time{}
	}
	return in, err
}

// AlertInstances implements alerts.Store.
func (s *Store) AlertInstances(ctx context.Context) ([]alerts.Instance, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT `+instanceCols+` FROM alert_instances ORDER BY rule_key, key`)
	if err != nil {
		return nil, pg.Interpret(err, "list alert instances")
	}
	out, err := pgx.CollectRows(rows, scanInstance)
	return out, pg.Interpret(err, "list alert instances")
}

// SaveAlertPass implements alerts.Store: state, history, rule statuses and the outbox
// rows of the notifications, in one transaction (ops rule 10).
func (s *Store) SaveAlertPass(ctx context.Context, p alerts.Pass) error {
	b := &pgx.Batch{}
	for _, in := range p.Upserts {
		b.Queue(`
INSERT INTO alert_instances (key, rule_key, alert, labels, annotations, state, value, active_at, fired_at, last_true_at, since)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (key) DO UPDATE SET rule_key = excluded.rule_key, alert = excluded.alert, labels = excluded.labels,
	annotations = excluded.annotations, state = excluded.state, value = excluded.value, active_at = excluded.active_at,
	fired_at = excluded.fired_at, last_true_at = excluded.last_true_at, since = excluded.since`,
			in.Key, in.RuleKey, in.Alert, orEmpty(in.Labels), orEmpty(in.Annotations), string(in.State), finite(in.Value), in.ActiveAt,
			pg.NullTime(!in.FiredAt.IsZero(), in.FiredAt), in.LastTrueAt, in.Since)
	}
	if len(p.Deletes) > 0 {
		b.Queue(`DELETE FROM alert_instances WHERE key = ANY($1)`, p.Deletes)
	}
	for _, h := range p.History {
		b.Queue(`INSERT INTO alert_history (at, rule_key, alert, instance_key, labels, from_state, to_state, value)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, h.At, h.RuleKey, h.Alert, h.InstanceKey, orEmpty(h.Labels), string(h.From), string(h.To), finite(h.Value))
	}
	for _, s := range p.Statuses {
		var v any
		if s.HasValue {
			v = finite(s.Value)
		}
		b.Queue(`
INSERT INTO alert_rule_status (rule_key, group_name, alert, health, message, value, evaluated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (rule_key) DO UPDATE SET group_name = excluded.group_name, alert = excluded.alert, health = excluded.health,
	message = excluded.message, value = excluded.value, evaluated_at = excluded.evaluated_at`,
			s.RuleKey, s.Group, s.Alert, string(s.Health), s.Message, v, s.EvaluatedAt)
	}
	for _, n := range p.Notifications {
		payload, err := json.Marshal(n.Notice)
		if err != nil {
			return fmt.Errorf("encode notification: %w", err)
		}
		b.Queue(`INSERT INTO alert_outbox (event_id, receiver, alert_key, resend, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			uuid.New(), n.Receiver, n.InstanceKey, n.Resend, payload, p.Now)
	}
	if b.Len() == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, b).Close()
	})
	return pg.Interpret(err, "save alert pass")
}

// AlertRuleStatuses returns the last evaluation of every rule.
func (s *Store) AlertRuleStatuses(ctx context.Context) ([]alerts.RuleStatus, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT rule_key, group_name, alert, health, message, value, evaluated_at FROM alert_rule_status`)
	if err != nil {
		return nil, pg.Interpret(err, "list alert rule statuses")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (alerts.RuleStatus, error) {
		var s alerts.RuleStatus
		var health string
		var v *float64
		err := r.Scan(&s.RuleKey, &s.Group, &s.Alert, &health, &s.Message, &v, &s.EvaluatedAt)
		s.Health = alerts.Health(health)
		if v != nil {
			s.Value, s.HasValue = *v, true
		}
		return s, err
	})
	return out, pg.Interpret(err, "list alert rule statuses")
}

// AlertHistory returns the newest transitions first, at most limit of them.
func (s *Store) AlertHistory(ctx context.Context, limit int) ([]alerts.Transition, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT at, rule_key, alert, instance_key, labels, from_state, to_state, value
FROM alert_history ORDER BY at DESC, id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, pg.Interpret(err, "list alert history")
	}
	out, err := pgx.CollectRows(rows, scanTransition)
	return out, pg.Interpret(err, "list alert history")
}

// AlertTransitions returns, oldest first, the transitions in [from, to) and each
// instance's last one before from: what an instance was doing when the window opened.
func (s *Store) AlertTransitions(ctx context.Context, from, to time.Time) ([]alerts.Transition, error) {
	rows, err := s.db.Pool.Query(ctx, `
SELECT at, rule_key, alert, instance_key, labels, from_state, to_state, value FROM (
	(SELECT DISTINCT ON (instance_key) id, at, rule_key, alert, instance_key, labels, from_state, to_state, value
	 FROM alert_history WHERE at < $1 ORDER BY instance_key, at DESC, id DESC)
	UNION ALL
	SELECT id, at, rule_key, alert, instance_key, labels, from_state, to_state, value
	FROM alert_history WHERE at >= $1 AND at < $2
) h ORDER BY at, id`, from, to)
	if err != nil {
		return nil, pg.Interpret(err, "read alert transitions")
	}
	out, err := pgx.CollectRows(rows, scanTransition)
	return out, pg.Interpret(err, "read alert transitions")
}

func scanTransition(r pgx.CollectableRow) (alerts.Transition, error) {
	var t alerts.Transition
	var from, to string
	err := r.Scan(&t.At, &t.RuleKey, &t.Alert, &t.InstanceKey, &t.Labels, &from, &to, &t.Value)
	t.From, t.To = alerts.State(from), alerts.State(to)
	t.At = t.At.UTC()
	return t, err
}

// PruneAlerts deletes delivered notifications and history older than their cut-offs.
func (s *Store) PruneAlerts(ctx context.Context, deliveredBefore, historyBefore time.Time) error {
	if _, err := s.db.Pool.Exec(ctx, `DELETE FROM alert_outbox WHERE published_at < $1`, deliveredBefore); err != nil {
		return pg.Interpret(err, "prune alert outbox")
	}
	_, err := s.db.Pool.Exec(ctx, `DELETE FROM alert_history WHERE at < $1`, historyBefore)
	return pg.Interpret(err, "prune alert history")
}

// Outbox is the alert notifications' outbox, for an outbox.Relay with an
// alerts.Dispatcher. Rows of one receiver and instance leave in order: a row is claimed
// only when no older row of the same pair waits, so a resolve never overtakes the firing
// it ends, and an undelivered resend with a newer row behind it is dropped as pointless.
type Outbox struct{ DB *pg.DB }

// ClaimEvents implements outbox.Store.
func (o Outbox) ClaimEvents(ctx context.Context, now, holdUntil time.Time, limit int) ([]outbox.Event, error) {
	var evs []outbox.Event
	err := pgx.BeginFunc(ctx, o.DB.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
UPDATE alert_outbox a SET published_at = @now, last_error = 'superseded by a newer notification'
WHERE a.published_at IS NULL AND a.resend AND (a.locked_until IS NULL OR a.locked_until <= @now)
	AND EXISTS (SELECT 1 FROM alert_outbox n
		WHERE n.published_at IS NULL AND n.receiver = a.receiver AND n.alert_key = a.alert_key AND n.id > a.id)`,
			pgx.NamedArgs{"now": now}); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
WITH s AS (
	SELECT a.id FROM alert_outbox a
	WHERE a.published_at IS NULL AND (a.locked_until IS NULL OR a.locked_until <= @now)
		AND NOT EXISTS (SELECT 1 FROM alert_outbox p
			WHERE p.published_at IS NULL AND p.receiver = a.receiver AND p.alert_key = a.alert_key AND p.id < a.id)
	ORDER BY a.id LIMIT @limit
	FOR UPDATE SKIP LOCKED
)
UPDATE alert_outbox a SET locked_until = @hold, attempts = attempts + 1
FROM s WHERE a.id = s.id
RETURNING a.id, a.event_id::text, a.receiver, a.alert_key, a.payload, a.created_at, a.attempts`,
			pgx.NamedArgs{"now": now, "hold": holdUntil, "limit": limit})
		if err != nil {
			return err
		}
		evs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (outbox.Event, error) {
			var e outbox.Event
			err := r.Scan(&e.ID, &e.EventID, &e.Topic, &e.EntityID, &e.Payload, &e.CreatedAt, &e.Attempts)
			return e, err
		})
		return err
	})
	return evs, pg.Interpret(err, "claim alert notifications")
}

// MarkPublished implements outbox.Store.
func (o Outbox) MarkPublished(ctx context.Context, ids []int64, at time.Time) error {
	_, err := o.DB.Pool.Exec(ctx, `UPDATE alert_outbox SET published_at = $2, locked_until = NULL, last_error = '' WHERE id = ANY($1)`, ids, at)
	return pg.Interpret(err, "mark alert notifications delivered")
}

// MarkFailed implements outbox.Store.
func (o Outbox) MarkFailed(ctx context.Context, id int64, retryAt time.Time, reason string) error {
	_, err := o.DB.Pool.Exec(ctx, `UPDATE alert_outbox SET locked_until = $2, last_error = left($3, 500) WHERE id = $1`, id, retryAt, reason)
	return pg.Interpret(err, "mark alert notification failed")
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// finite keeps NaN and infinities, which JSON and the page cannot show, out of the tables.
func finite(v float64) float64 {
	if v != v || v > 1e300 || v < -1e300 {
		return 0
	}
	return v
}
