package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// Finding is one thing reconciliation found wrong, as a row of recon_exceptions keeps it.
// Two stores record findings: the reconciler's (ops/pg/reconstore), which checks the kind
// and chooses the severity for ops/recon, and the ledger's, which records the one it finds
// itself, a refund that failed after it succeeded (RecordFailedAfterSuccess). Both go
// through RecordFinding, so one row holds every sighting of a kind, provider and ref
// whoever saw it.
type Finding struct {
	Kind        string
	Provider    string
	Ref         string
	TenantID    int64
	OperationID string
	ChargeRefs  []string
	Severity    string
	// Resolved records the finding as already handled; Note then says how.
	Resolved    bool
	Note        string
	Summary     string
	AmountCents int64
	Currency    string
	Details     json.RawMessage
	Actor       string
	At          time.Time
}

// ExceptionState is what the audit log keeps of an exception before and after a change.
type ExceptionState struct {
	Assignee   string   `json:"assignee"`
	ChargeRefs []string `json:"charge_refs"`
	Severity   string   `json:"severity"`
	Status     string   `json:"status"`
	Version    int64    `json:"version"`
}

// JSON is s as the audit log's before or after column holds it.
func (s ExceptionState) JSON() []byte {
	b, _ := json.Marshal(s)
	return b
}

// The exception a refund that failed after it succeeded raises, in the words of
// recon_exceptions: ops/recon calls this kind ExceptionFailedAfterSuccess, and its default
// severity for it is high. The ledger's store cannot ask ops/recon, which sits above it.
const (
	failedAfterSuccessKind     = "failed_after_success"
	failedAfterSuccessSeverity = "high"
)

// RecordFailedAfterSuccess implements ops.EventStore: the exception of a refund the
// provider accepted and later failed, one per operation however often it is seen. Its
// summary says that this refund moved no money, never that no money moved: another refund
// of the same operation (a double refund, or one made by hand with the operation's id) may
// have, and the summary names each one Settle holds as made (ops rule 12).
func (db *DB) RecordFailedAfterSuccess(ctx context.Context, op *ops.Operation, r ops.ProviderRecord, at time.Time) error {
	f := Finding{Kind: failedAfterSuccessKind, Severity: failedAfterSuccessSeverity, Provider: op.Provider, Ref: op.ID,
		TenantID: op.TenantID, OperationID: op.ID, ChargeRefs: []string{r.Ref}, AmountCents: r.AmountCents, Currency: r.Currency,
		Details: r.Raw, Actor: "ledger", At: at}
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		others, err := otherMadeRefunds(ctx, tx, op, r.Ref)
		if err != nil {
			return err
		}
		f.Summary = failedAfterSuccessSummary(op, r, others)
		_, _, err = RecordFinding(ctx, tx, f)
		return err
	})
	return interpret(err, "record finding")
}

// otherMadeRefunds lists the charges of op at its provider, other than ref, that Settle
// holds as having taken money, through provider_charges_operation_idx, each worded as
// "re_… (42.00 USD, succeeded)".
func otherMadeRefunds(ctx context.Context, tx pgx.Tx, op *ops.Operation, ref string) ([]string, error) {
	made, err := madeCharges(ctx, tx, op.ID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range made {
		if c.Provider == op.Provider && c.Ref != ref {
			out = append(out, fmt.Sprintf("%s (%s, %s)", c.Ref, ops.FormatMoney(c.AmountCents, c.Currency), c.Status))
		}
	}
	return out, nil
}

// MadeCharges implements ops.MadeCharges: the charges recorded against the operation opID
// that took money, oldest first, through provider_charges_operation_idx.
func (db *DB) MadeCharges(ctx context.Context, opID string) ([]ops.ProviderRecord, error) {
	made, err := madeCharges(ctx, db.Pool, opID)
	return made, interpret(err, "read made charges")
}

// madeCharges is MadeCharges on q, a transaction or the pool.
func madeCharges(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, opID string) ([]ops.ProviderRecord, error) {
	rows, err := q.Query(ctx, `SELECT provider, charge_ref, amount_cents, currency, status FROM provider_charges
WHERE operation_id = $1::uuid AND status IN `+ChargedStatuses+`
ORDER BY charged_at, charge_ref`, operationIDArg(opID))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ops.ProviderRecord, error) {
		r := ops.ProviderRecord{OperationID: opID}
		return r, row.Scan(&r.Provider, &r.Ref, &r.AmountCents, &r.Currency, &r.Status)
	})
}

// failedAfterSuccessSummary says what is known of the money of op, whose refund r failed
// after it was accepted: r moved none, and others are the operation's other refunds Settle
// holds as made. Without one, Settle knows of none, which is not that none was made (one
// made by hand without the operation's id names no operation).
func failedAfterSuccessSummary(op *ops.Operation, r ops.ProviderRecord, others []string) string {
	head := fmt.Sprintf("Refund %s of %s was accepted, then %s at %s: the customer was told it was on its way, and this refund moved no money",
		r.Ref, ops.FormatMoney(r.AmountCents, r.Currency), r.Status, op.Provider)
	if len(others) == 0 {
		return head + "; Settle knows of no other refund of this operation."
	}
	return head + ", but Settle holds another refund of this operation as made: " + strings.Join(others, ", ") +
		". Check it before refunding again."
}

// RecordFinding records f in tx and leaves tx holding the exception's row, so two runs
// that see the same finding at once make one exception between them, and the caller may
// read the row as this call left it. It returns the exception's id and whether this call
// created it; its errors are the database's, which the caller interprets once its
// transaction ends.
func RecordFinding(ctx context.Context, tx pgx.Tx, f Finding) (id int64, created bool, err error) {
	refs := slices.Clone(f.ChargeRefs)
	sort.Strings(refs)
	refs = slices.Compact(refs)
	if refs == nil {
		refs = []string{}
	}
	args := pgx.NamedArgs{"kind": f.Kind, "provider": f.Provider, "ref": f.Ref, "tenant": f.TenantID,
		"op": operationIDArg(f.OperationID), "refs": refs, "severity": f.Severity, "resolved": f.Resolved,
		"note": f.Note, "summary": f.Summary, "amount": f.AmountCents, "currency": f.Currency,
		"details": jsonOrNil(f.Details), "at": f.At, "actor": f.Actor}
	cur, err := lockException(ctx, tx, args)
	if errors.Is(err, pgx.ErrNoRows) {
		// ON CONFLICT DO NOTHING: a concurrent run may insert first; then take its row.
		id, err = openException(ctx, tx, f, args)
		if !errors.Is(err, pgx.ErrNoRows) {
			return id, err == nil, err
		}
		cur, err = lockException(ctx, tx, args)
	}
	if err != nil {
		return 0, false, err
	}
	return cur.id, false, seenAgain(ctx, tx, f, cur, refs, args)
}

// lockedException is what recording a finding reads of its exception's row.
type lockedException struct {
	id    int64
	state ExceptionState
}

// lockedCols are the recon_exceptions columns, over alias e, that scanLocked reads.
const lockedCols = `e.id, e.assignee, e.charge_refs, e.severity, e.status, e.version`

func scanLocked(row pgx.Row) (*lockedException, error) {
	var l lockedException
	s := &l.state
	if err := row.Scan(&l.id, &s.Assignee, &s.ChargeRefs, &s.Severity, &s.Status, &s.Version); err != nil {
		return nil, err
	}
	return &l, nil
}

// lockException reads and locks the exception for args' kind, provider and ref; pgx.ErrNoRows
// when there is none yet.
func lockException(ctx context.Context, tx pgx.Tx, args pgx.NamedArgs) (*lockedException, error) {
	return scanLocked(tx.QueryRow(ctx, `SELECT `+lockedCols+` FROM recon_exceptions e
WHERE e.kind = @kind AND e.provider = @provider AND e.ref = @ref FOR UPDATE`, args))
}

// openException inserts a finding seen for the first time, open or already resolved, with its
// audit row. It returns pgx.ErrNoRows when a concurrent run inserted the row first.
func openException(ctx context.Context, tx pgx.Tx, f Finding, args pgx.NamedArgs) (int64, error) {
	cur, err := scanLocked(tx.QueryRow(ctx, `
INSERT INTO recon_exceptions AS e (kind, provider, ref, tenant_id, operation_id, charge_refs, severity, status, note,
	summary, amount_cents, currency, details, first_seen_at, last_seen_at, updated_at, resolved_at, resolved_by)
VALUES (@kind, @provider, @ref, nullif(@tenant::bigint, 0), (SELECT id FROM operations WHERE id = @op::uuid),
	@refs, @severity, CASE WHEN @resolved THEN 'resolved' ELSE 'open' END, @note, @summary, @amount, @currency,
	@details::jsonb, @at, @at, @at, CASE WHEN @resolved THEN @at::timestamptz END, CASE WHEN @resolved THEN @actor ELSE '' END)
ON CONFLICT (kind, provider, ref) DO NOTHING
RETURNING `+lockedCols, args))
	if err != nil {
		return 0, err
	}
	action := "open"
	if f.Resolved {
		action = "resolve"
	}
	_, err = tx.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, after, reason)
VALUES ($1, $2, $3, 'recon_exception', $4, $5, $6)`, f.At, f.Actor, action, fmt.Sprint(cur.id), cur.state.JSON(),
		strings.TrimSpace(f.Summary+" "+f.Note))
	return cur.id, err
}

// seenAgain records another sighting of the locked exception cur. A resolved exception that
// gained a charge nobody looked at is open again; anything else only notes the sighting, so a
// person's version stays valid.
func seenAgain(ctx context.Context, tx pgx.Tx, f Finding, cur *lockedException, refs []string, args pgx.NamedArgs) error {
	merged := slices.Clone(cur.state.ChargeRefs)
	merged = append(merged, refs...)
	sort.Strings(merged)
	merged = slices.Compact(merged)
	reopen := cur.state.Status == "resolved" && len(merged) > len(cur.state.ChargeRefs)
	args["merged"], args["reopen"], args["id"] = merged, reopen, cur.id
	next, err := scanLocked(tx.QueryRow(ctx, `
UPDATE recon_exceptions e SET last_seen_at = greatest(e.last_seen_at, @at), seen_count = e.seen_count + 1,
	charge_refs = @merged, summary = @summary, details = coalesce(@details::jsonb, e.details),
	amount_cents = @amount, currency = @currency,
	status = CASE WHEN @reopen THEN 'open' ELSE e.status END,
	resolved_at = CASE WHEN @reopen THEN NULL ELSE e.resolved_at END,
	resolved_by = CASE WHEN @reopen THEN '' ELSE e.resolved_by END,
	version = e.version + CASE WHEN @reopen THEN 1 ELSE 0 END,
	updated_at = CASE WHEN @reopen THEN @at::timestamptz ELSE e.updated_at END
WHERE e.id = @id
RETURNING `+lockedCols, args))
	if err != nil {
		return err
	}
	if reopen {
		_, err = tx.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after, reason)
VALUES ($1, $2, 'reopen', 'recon_exception', $3, $4, $5, $6)`, f.At, f.Actor, fmt.Sprint(cur.id), cur.state.JSON(),
			next.state.JSON(), "The provider shows another record: "+f.Summary)
	}
	return err
}
