package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
)

// RecordFinding implements recon.Store. It runs in one transaction holding the row, so
// two runs that see the same finding at once make one exception between them.
func (db *DB) RecordFinding(ctx context.Context, f recon.Finding) (*recon.Exception, bool, error) {
	if !f.Kind.Valid() {
		return nil, false, ops.Errorf(ops.EINVALID, "Unknown exception kind %q.", f.Kind)
	}
	refs := slices.Clone(f.ChargeRefs)
	sort.Strings(refs)
	refs = slices.Compact(refs)
	if refs == nil {
		refs = []string{}
	}
	sev := f.Severity
	if !sev.Valid() {
		sev = recon.DefaultSeverity(f.Kind)
	}
	var out *recon.Exception
	var created bool
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		args := pgx.NamedArgs{"kind": string(f.Kind), "provider": f.Provider, "ref": f.Ref, "tenant": f.TenantID,
			"op": operationIDArg(f.OperationID), "refs": refs, "severity": string(sev), "resolved": f.Resolved,
			"note": f.Note, "summary": f.Summary, "amount": f.AmountCents, "currency": f.Currency,
			"details": jsonOrNil(f.Details), "at": f.At, "actor": f.Actor}
		cur, err := lockException(ctx, tx, args)
		if errors.Is(err, pgx.ErrNoRows) {
			// ON CONFLICT DO NOTHING: a concurrent run may insert first; then take its row.
			out, err = openException(ctx, tx, f, args)
			if !errors.Is(err, pgx.ErrNoRows) {
				created = true
				return err
			}
			cur, err = lockException(ctx, tx, args)
		}
		if err != nil {
			return err
		}
		out, err = seenAgain(ctx, tx, f, cur, refs, args)
		return err
	})
	if err != nil {
		return nil, false, interpret(err, "record finding")
	}
	return out, created, nil
}

// lockException reads and locks the exception for args' kind, provider and ref; pgx.ErrNoRows
// when there is none yet.
func lockException(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs) (*recon.Exception, error) {
	return scanException(tx.QueryRow(ctx, `SELECT `+exCols+` FROM recon_exceptions e
WHERE e.kind = @kind AND e.provider = @provider AND e.ref = @ref FOR UPDATE`, args))
}

// openException inserts a finding seen for the first time, open or already resolved, with its
// audit row. It returns pgx.ErrNoRows when a concurrent run inserted the row first.
func openException(ctx context.Context, tx pgx.Tx, f recon.Finding, args pgx.NamedArgs) (*recon.Exception, error) {
	cur, err := scanException(tx.QueryRow(ctx, `
INSERT INTO recon_exceptions AS e (kind, provider, ref, tenant_id, operation_id, charge_refs, severity, status, note,
	summary, amount_cents, currency, details, first_seen_at, last_seen_at, updated_at, resolved_at, resolved_by)
VALUES (@kind, @provider, @ref, nullif(@tenant::bigint, 0), (SELECT id FROM operations WHERE id = @op::uuid),
	@refs, @severity, CASE WHEN @resolved THEN 'resolved' ELSE 'open' END, @note, @summary, @amount, @currency,
	@details::jsonb, @at, @at, @at, CASE WHEN @resolved THEN @at::timestamptz END, CASE WHEN @resolved THEN @actor ELSE '' END)
ON CONFLICT (kind, provider, ref) DO NOTHING
RETURNING `+exCols, args))
	if err != nil {
		return nil, err
	}
	action := "open"
	if f.Resolved {
		action = "resolve"
	}
	_, err = tx.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, after, reason)
VALUES ($1, $2, $3, 'recon_exception', $4, $5, $6)`, f.At, f.Actor, action, fmt.Sprint(cur.ID), exceptionState(cur),
		strings.TrimSpace(f.Summary+" "+f.Note))
	return cur, err
}

// seenAgain records another sighting of the locked exception cur. A resolved exception that
// gained a charge nobody looked at is open again; anything else only notes the sighting, so a
// person's version stays valid.
func seenAgain(ctx context.Context, tx pgx.Tx, f recon.Finding, cur *recon.Exception, refs []string, args pgx.NamedArgs) (*recon.Exception, error) {
	merged := slices.Clone(cur.ChargeRefs)
	merged = append(merged, refs...)
	sort.Strings(merged)
	merged = slices.Compact(merged)
	reopen := cur.Status == recon.ExceptionResolved && len(merged) > len(cur.ChargeRefs)
	args["merged"], args["reopen"], args["id"] = merged, reopen, cur.ID
	next, err := scanException(tx.QueryRow(ctx, `
UPDATE recon_exceptions e SET last_seen_at = greatest(e.last_seen_at, @at), seen_count = e.seen_count + 1,
	charge_refs = @merged, summary = @summary, details = coalesce(@details::jsonb, e.details),
	amount_cents = @amount, currency = @currency,
	status = CASE WHEN @reopen THEN 'open' ELSE e.status END,
	resolved_at = CASE WHEN @reopen THEN NULL ELSE e.resolved_at END,
	resolved_by = CASE WHEN @reopen THEN '' ELSE e.resolved_by END,
	version = e.version + CASE WHEN @reopen THEN 1 ELSE 0 END,
	updated_at = CASE WHEN @reopen THEN @at::timestamptz ELSE e.updated_at END
WHERE e.id = @id
RETURNING `+exCols, args))
	if err != nil {
		return nil, err
	}
	if reopen {
		_, err = tx.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after, reason)
VALUES ($1, $2, 'reopen', 'recon_exception', $3, $4, $5, $6)`, f.At, f.Actor, fmt.Sprint(cur.ID), exceptionState(cur),
			exceptionState(next), "The provider shows another record: "+f.Summary)
	}
	return next, err
}
