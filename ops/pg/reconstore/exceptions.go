package reconstore

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/recon"
)

// ListExceptions implements recon.ExceptionStore.
func (s *Store) ListExceptions(ctx context.Context, f recon.ExceptionFilter) ([]*recon.Exception, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	where, args := exceptionWhere(f)
	if f.Status != "" {
		where += " AND e.status = @status"
		args["status"] = string(f.Status)
	}
	if f.BeforeID > 0 {
		where += " AND e.id < @before"
		args["before"] = f.BeforeID
	}
	args["limit"] = f.Limit
	rows, err := s.db.Pool.Query(ctx, `SELECT `+exCols+` FROM recon_exceptions e WHERE `+where+` ORDER BY e.id DESC LIMIT @limit`, args)
	if err != nil {
		return nil, pg.Interpret(err, "list exceptions")
	}
	defer rows.Close()
	var out []*recon.Exception
	for rows.Next() {
		e, err := scanException(rows)
		if err != nil {
			return nil, pg.Interpret(err, "list exceptions")
		}
		out = append(out, e)
	}
	return out, pg.Interpret(rows.Err(), "list exceptions")
}

// CountExceptions implements recon.ExceptionStore.
func (s *Store) CountExceptions(ctx context.Context, f recon.ExceptionFilter) (map[recon.ExceptionStatus]int64, error) {
	where, args := exceptionWhere(f)
	rows, err := s.db.Pool.Query(ctx, `SELECT e.status, count(*) FROM recon_exceptions e WHERE `+where+` GROUP BY e.status`, args)
	if err != nil {
		return nil, pg.Interpret(err, "count exceptions")
	}
	defer rows.Close()
	out := map[recon.ExceptionStatus]int64{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, pg.Interpret(err, "count exceptions")
		}
		out[recon.ExceptionStatus(s)] = n
	}
	return out, pg.Interpret(rows.Err(), "count exceptions")
}

func exceptionWhere(f recon.ExceptionFilter) (string, pgx.NamedArgs) {
	conds := []string{"true"}
	args := pgx.NamedArgs{}
	if f.Kind != "" {
		conds, args["kind"] = append(conds, "e.kind = @kind"), string(f.Kind)
	}
	if f.Severity != "" {
		conds, args["severity"] = append(conds, "e.severity = @severity"), string(f.Severity)
	}
	if f.Provider != "" {
		conds, args["provider"] = append(conds, "e.provider = @provider"), f.Provider
	}
	if f.TenantID > 0 {
		conds, args["tenant"] = append(conds, "e.tenant_id = @tenant"), f.TenantID
	}
	return strings.Join(conds, " AND "), args
}

// GetException implements recon.ExceptionStore.
func (s *Store) GetException(ctx context.Context, id int64) (*recon.Exception, error) {
	e, err := scanException(s.db.Pool.QueryRow(ctx, `SELECT `+exCols+` FROM recon_exceptions e WHERE e.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ops.Errorf(ops.ENOTFOUND, "No exception %d.", id)
	}
	return e, pg.Interpret(err, "get exception")
}

// UpdateException implements recon.ExceptionStore: the compare-and-set on version with its
// audit row in the same statement.
func (s *Store) UpdateException(ctx context.Context, cur, next *recon.Exception, c recon.ExceptionChange) (*recon.Exception, error) {
	out, err := scanException(s.db.Pool.QueryRow(ctx, `
WITH up AS (
	UPDATE recon_exceptions e SET status = @status, severity = @severity, assignee = @assignee, note = @note,
		resolved_at = @resolved_at, resolved_by = @resolved_by, version = e.version + 1, updated_at = @now
	WHERE e.id = @id AND e.version = @version
	RETURNING `+exCols+`
), aud AS (
	INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after, reason)
	SELECT @now, @actor, @action, 'recon_exception', up.id::text, @before::jsonb,
		jsonb_build_object('status', up.status, 'severity', up.severity, 'assignee', up.assignee, 'version', up.version,
			'charge_refs', up.charge_refs),
		@reason
	FROM up
)
SELECT * FROM up`, pgx.NamedArgs{"id": cur.ID, "version": cur.Version, "status": string(next.Status),
		"severity": string(next.Severity), "assignee": next.Assignee, "note": next.Note, "resolved_at": next.ResolvedAt,
		"resolved_by": next.ResolvedBy, "now": c.At, "actor": c.Actor, "action": string(c.Action),
		"before": string(exceptionState(cur)), "reason": strings.TrimSpace(c.Note)}))
	if errors.Is(err, pgx.ErrNoRows) {
		now, gerr := s.GetException(ctx, cur.ID)
		if gerr != nil {
			return nil, gerr
		}
		return nil, ops.Errorf(ops.ECONFLICT, "Exception %d changed since you looked (now %s, version %d). Reload and try again.",
			cur.ID, now.Status, now.Version)
	}
	if err != nil {
		return nil, pg.Interpret(err, "update exception")
	}
	return out, nil
}

// exceptionChargesSQL lists an exception's charges: those of its operation, through
// provider_charges_operation_idx, or those it names, through the (provider, charge_ref) key;
// no index on the provider's charges by time is needed, so a success writes none.
const exceptionChargesSQL = `SELECT ` + chargeCols + ` FROM provider_charges pc
WHERE pc.provider = @provider AND (pc.operation_id = nullif(@op, '')::uuid OR pc.charge_ref = ANY(@refs))
ORDER BY pc.charged_at, pc.id`

// ExceptionCharges implements recon.ExceptionStore.
func (s *Store) ExceptionCharges(ctx context.Context, ex *recon.Exception) ([]recon.ProviderCharge, error) {
	refs := ex.ChargeRefs
	if refs == nil {
		refs = []string{}
	}
	rows, err := s.db.Pool.Query(ctx, exceptionChargesSQL, pgx.NamedArgs{"provider": ex.Provider, "op": ex.OperationID, "refs": refs})
	if err != nil {
		return nil, pg.Interpret(err, "list exception charges")
	}
	out, err := pgx.CollectRows(rows, scanCharge)
	return out, pg.Interpret(err, "list exception charges")
}

// Audit implements recon.ExceptionStore.
func (s *Store) Audit(ctx context.Context, entity, id string) ([]recon.AuditEntry, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT at, actor, action, reason, before, after FROM audit_log
WHERE entity = $1 AND entity_id = $2 ORDER BY id`, entity, id)
	if err != nil {
		return nil, pg.Interpret(err, "read audit log")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (recon.AuditEntry, error) {
		var a recon.AuditEntry
		err := r.Scan(&a.At, &a.Actor, &a.Action, &a.Reason, &a.Before, &a.After)
		return a, err
	})
	return out, pg.Interpret(err, "read audit log")
}
