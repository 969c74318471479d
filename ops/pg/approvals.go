package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

var _ ops.ProposalStore = (*DB)(nil)

// proposalCols are the close_proposals columns scanProposal reads, in its order.
const proposalCols = `p.id, p.operation_id::text, p.tenant_id, p.kind, p.to_status, p.provider_ref, p.note, p.why,
	p.proposed_by, coalesce(p.proposed_by_user, 0), p.proposed_at, p.expires_at, p.state, p.decided_by, p.decided_at, p.outcome`

func scanProposal(row pgx.Row) (*ops.Proposal, error) {
	var p ops.Proposal
	var kind, to, state string
	err := row.Scan(&p.ID, &p.OperationID, &p.TenantID, &kind, &to, &p.ProviderRef, &p.Note, &p.Why,
		&p.ProposedBy, &p.ProposedByID, &p.ProposedAt, &p.ExpiresAt, &state, &p.DecidedBy, &p.DecidedAt, &p.Outcome)
	p.Kind, p.To, p.State = ops.CloseKind(kind), ops.Status(to), ops.ProposalState(state)
	return &p, err
}

// proposeSQL inserts an open proposal for an operation that is still open; the share lock
// waits for a close in flight, so a proposal never opens on an operation that just closed.
var proposeSQL = `
INSERT INTO close_proposals AS p (operation_id, tenant_id, kind, to_status, provider_ref, note, why,
	proposed_by, proposed_by_user, proposed_at, expires_at)
SELECT o.id, o.tenant_id, @kind, @to, @ref, @note, @why, @by, @by_user, @now, @expires
FROM operations o WHERE o.id = @op::uuid AND o.status IN ` + openStatuses + `
FOR SHARE
RETURNING ` + proposalCols

// Propose implements ops.ProposalStore, in one transaction with its audit row.
func (db *DB) Propose(ctx context.Context, in ops.Proposal, now time.Time) (*ops.Proposal, error) {
	var out *ops.Proposal
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE close_proposals SET state = 'expired', decided_at = expires_at
WHERE operation_id = $1::uuid AND state = 'open' AND expires_at <= $2`, in.OperationID, now); err != nil {
			return interpret(err, "expire lapsed proposal")
		}
		p, err := scanProposal(tx.QueryRow(ctx, proposeSQL, pgx.NamedArgs{"op": in.OperationID, "kind": string(in.Kind),
			"to": string(in.To), "ref": in.ProviderRef, "note": in.Note, "why": in.Why, "by": in.ProposedBy,
			"by_user": nullID(in.ProposedByID), "now": in.ProposedAt, "expires": in.ExpiresAt}))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return ops.Errorf(ops.ECONFLICT, "Operation %s is closed already; nothing was proposed.", in.OperationID)
		case sqlState(err) == "23505":
			return db.openProposalConflict(ctx, in.OperationID, err)
		case err != nil:
			return interpret(err, "propose close")
		}
		out = p
		return auditProposal(ctx, tx, p, "close.propose", p.ProposedBy, p.ProposedAt,
			fmt.Sprintf("Proposed closing as %s: %s", p.To, p.Note))
	})
	return out, err
}

// openProposalConflict names the proposal that refused a newer one.
func (db *DB) openProposalConflict(ctx context.Context, opID string, cause error) error {
	cur, err := db.LatestProposal(ctx, opID)
	if err != nil || cur == nil {
		return &ops.Error{Code: ops.ECONFLICT, Message: "Another close of this operation awaits approval already.", Err: cause}
	}
	return &ops.Error{Code: ops.ECONFLICT, Reason: "proposal_open", Err: cause, Message: fmt.Sprintf(
		"%s proposed closing it as %s at %s; that proposal awaits approval until %s, so a newer one is refused.",
		cur.ProposedBy, cur.To, cur.ProposedAt.UTC().Format(time.RFC3339), cur.ExpiresAt.UTC().Format(time.RFC3339))}
}

// LatestProposal implements ops.ProposalStore.
func (db *DB) LatestProposal(ctx context.Context, opID string) (*ops.Proposal, error) {
	canonical, ok := CanonicalID(opID)
	if !ok {
		return nil, nil // no operation, so no proposal
	}
	p, err := scanProposal(db.Pool.QueryRow(ctx, `SELECT `+proposalCols+` FROM close_proposals p
WHERE p.operation_id = $1::uuid ORDER BY p.id DESC LIMIT 1`, canonical))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return p, interpret(err, "read proposal")
}

// DecideProposal implements ops.ProposalStore, in one transaction with its audit row.
func (db *DB) DecideProposal(ctx context.Context, id int64, state ops.ProposalState, by, outcome string, at time.Time) (*ops.Proposal, error) {
	var out *ops.Proposal
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		p, err := scanProposal(tx.QueryRow(ctx, `UPDATE close_proposals p SET state = $2, decided_by = $3, outcome = $4, decided_at = $5
WHERE p.id = $1 AND p.state = 'open' RETURNING `+proposalCols, id, string(state), by, outcome, at))
		if errors.Is(err, pgx.ErrNoRows) {
			return ops.Errorf(ops.ECONFLICT, "The proposal was decided already; nothing was changed.")
		} else if err != nil {
			return interpret(err, "decide proposal")
		}
		out = p
		return auditProposal(ctx, tx, p, "close."+string(state), by, at, outcome)
	})
	return out, err
}

// auditProposal records a step of a proposal on its operation's timeline.
func auditProposal(ctx context.Context, tx pgx.Tx, p *ops.Proposal, action, actor string, at time.Time, reason string) error {
	_, err := tx.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, after, reason)
VALUES ($1, $2, $3, 'operation', $4, jsonb_build_object('proposal_id', $5::bigint, 'state', $6::text,
	'to', $7::text, 'proposed_by', $8::text, 'expires_at', $9::timestamptz), $10)`,
		at, actor, action, p.OperationID, p.ID, string(p.State), string(p.To), p.ProposedBy, p.ExpiresAt, reason)
	return interpret(err, "audit proposal")
}

// OpenProposals implements ops.ProposalStore.
func (db *DB) OpenProposals(ctx context.Context, opIDs []string) (map[string]*ops.Proposal, error) {
	out := map[string]*ops.Proposal{}
	if len(opIDs) == 0 {
		return out, nil
	}
	rows, err := db.Pool.Query(ctx, `SELECT `+proposalCols+` FROM close_proposals p
WHERE p.operation_id = ANY($1::uuid[]) AND p.state = 'open'`, opIDs)
	if err != nil {
		return nil, interpret(err, "read open proposals")
	}
	defer rows.Close()
	for rows.Next() {
		p, err := scanProposal(rows)
		if err != nil {
			return nil, interpret(err, "read open proposals")
		}
		out[p.OperationID] = p
	}
	return out, interpret(rows.Err(), "read open proposals")
}

// TenantApprovals implements ops.ProposalStore.
func (db *DB) TenantApprovals(ctx context.Context, tenantID int64) (*ops.TenantApprovals, error) {
	t := ops.TenantApprovals{TenantID: tenantID}
	var mode string
	err := db.Pool.QueryRow(ctx, `SELECT min_mode, min_cents, not_executed FROM tenant_approvals WHERE tenant_id = $1`, tenantID).
		Scan(&mode, &t.MinCents, &t.NotExecuted)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, interpret(err, "read tenant approvals")
	}
	t.MinOff = mode == "off"
	return &t, nil
}

// SetTenantApprovals stores the approval settings of the tenant named name and records who
// changed them in the audit log, in one transaction, and returns the tenant's id.
func (db *DB) SetTenantApprovals(ctx context.Context, name string, t ops.TenantApprovals, actor string, now time.Time) (int64, error) {
	a, err := db.ChangeTenantApprovals(ctx, name, t, KeepApprovals{}, actor, now)
	if err != nil {
		return 0, err
	}
	return a.TenantID, nil
}

// KeepApprovals names the settings of a tenant that ChangeTenantApprovals leaves as they
// are: the threshold (MinOff and MinCents), and the setting for closes as not executed.
type KeepApprovals struct{ Min, NotExecuted bool }

// ChangeTenantApprovals stores the approval settings of the tenant named name but those keep
// names, which stay as the tenant has them, and records the settings it leaves in the audit
// log, in one transaction that holds the tenant's row, so that two changes of different
// settings at once both apply. It returns the settings the tenant has now.
func (db *DB) ChangeTenantApprovals(ctx context.Context, name string, t ops.TenantApprovals, keep KeepApprovals, actor string, now time.Time) (*ops.TenantApprovals, error) {
	if err := checkTenantName(name); err != nil {
		return nil, err
	}
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT id FROM tenants WHERE name = $1 FOR NO KEY UPDATE`, name).Scan(&t.TenantID)
		if errors.Is(err, pgx.ErrNoRows) {
			return ops.Errorf(ops.ENOTFOUND, "No tenant %s; tenants are made by 'settle token add --tenant %s'.", name, name)
		} else if err != nil {
			return interpret(err, "find tenant")
		}
		if t, err = keptApprovals(ctx, tx, t, keep); err != nil {
			return err
		}
		mode := "default"
		switch {
		case t.MinOff:
			mode, t.MinCents = "off", nil
		case t.MinCents != nil:
			mode = "set"
		}
		_, err = tx.Exec(ctx, `INSERT INTO tenant_approvals (tenant_id, min_mode, min_cents, not_executed, updated_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id) DO UPDATE SET min_mode = $2, min_cents = $3, not_executed = $4, updated_at = $5`,
			t.TenantID, mode, t.MinCents, t.NotExecuted, now)
		if err != nil {
			return interpret(err, "set tenant approvals")
		}
		_, err = tx.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, after)
VALUES ($1, $2, 'tenant.approvals', 'tenant', $3::bigint::text,
	jsonb_build_object('tenant', $4::text, 'min_mode', $5::text, 'min_cents', $6::bigint, 'not_executed', $7::boolean))`,
			now, actor, t.TenantID, name, mode, t.MinCents, t.NotExecuted)
		return interpret(err, "audit tenant approvals")
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// keptApprovals is t with the settings keep names taken from the tenant's stored ones (a
// tenant with none stored follows the global ones for them).
func keptApprovals(ctx context.Context, tx pgx.Tx, t ops.TenantApprovals, keep KeepApprovals) (ops.TenantApprovals, error) {
	if !keep.Min && !keep.NotExecuted {
		return t, nil
	}
	var (
		mode     = "default"
		minCents *int64
		notExec  *bool
	)
	err := tx.QueryRow(ctx, `SELECT min_mode, min_cents, not_executed FROM tenant_approvals WHERE tenant_id = $1`, t.TenantID).
		Scan(&mode, &minCents, &notExec)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return t, interpret(err, "read tenant approvals")
	}
	if keep.Min {
		t.MinOff, t.MinCents = mode == "off", minCents
	}
	if keep.NotExecuted {
		t.NotExecuted = notExec
	}
	return t, nil
}

// nullID stores an unknown id (0) as NULL.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}
