package pg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/reqlog"
)

// openQuery is the one statement of Open.
var openQuery = `
WITH ins AS (
	INSERT INTO operations AS o (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
		order_ref, customer_ref, chat_ref, payment_ref, amount_cents, currency, request,
		status, phase, attempts, lease_owner, lease_until, first_sent_at, retry_until, retention_seconds,
		retry_uncertain, no_provider_key, has_lookup, api, model, store_opted_out, stripe_account, created_at, updated_at, intent_seq)
	SELECT @id, @tenant, @kind, @provider, @intent, '` + ops.ProviderKeyPrefix + `' || @id::uuid::text, @fp,
		@order, @customer, @chat, @payment, @amount, @currency, @request::jsonb,
		CASE WHEN @claimed THEN 'in_progress' ELSE 'received' END,
		CASE WHEN @claimed THEN 'sending' ELSE '' END,
		CASE WHEN @claimed THEN 1 ELSE 0 END,
		@claim, @lease::timestamptz,
		CASE WHEN @claimed THEN @now::timestamptz END,
		CASE WHEN @claimed THEN @retry_until::timestamptz END,
		@retention, @retry_uncertain, @no_provider_key, @has_lookup, @api,
		coalesce(@request::jsonb->'body'->>'model', ''),
		coalesce(@request::jsonb->'body'->'store' = 'false'::jsonb, false),
		CASE WHEN @provider = '` + stripeProvider + `' THEN coalesce(t.stripe_account, '') END,
		@now::timestamptz, @now::timestamptz, coalesce(latest.intent_seq, 0) + 1
	FROM tenants t LEFT JOIN LATERAL (SELECT l.id::text AS id, l.intent_seq FROM operations l
		WHERE l.tenant_id = @tenant AND l.kind = @kind AND l.intent_key = @intent ORDER BY l.intent_seq DESC LIMIT 1) latest ON true
	WHERE t.id = @tenant AND (NOT @guarded OR @latest::text = coalesce(latest.id, ''))
		AND (@provider <> '` + stripeProvider + `' OR EXISTS (SELECT 1 FROM tenants k WHERE k.id = @tenant FOR KEY SHARE))
	ON CONFLICT (tenant_id, kind, intent_key) WHERE status IN ` + openStatuses + `
	DO UPDATE SET duplicate_requests = o.duplicate_requests + 1
	RETURNING ` + openReturns + `, (o.xmax <> 0) AS existed
), cr AS (
	INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, request_id, duplicate, answer, received_at, answered_at)
	SELECT tenant_id, id::uuid, kind, @ref, @request_id, existed,
		CASE WHEN existed THEN NULL ELSE 'new' END, @now, CASE WHEN existed THEN NULL ELSE @now::timestamptz END
	FROM ins
	RETURNING id
), att AS (
	INSERT INTO attempts (operation_id, n, provider_key, owner, started_at)
	SELECT id::uuid, 1, provider_key, @claim, @now FROM ins WHERE NOT existed AND @claimed
	RETURNING id
)
SELECT ins.*, cr.id, coalesce(att.id, 0) FROM ins CROSS JOIN cr LEFT JOIN att ON true`

// Open implements ops.Store: one statement inserts the operation (or finds the open one for
// the intent, even one committed a moment ago by a concurrent request), records the client
// request, and for a new claimed operation begins its first attempt. A Stripe operation
// records the account its tenant is bound to in that statement: every attempt and lookup of
// it goes there, whatever binding a move makes later (ops rule 9). The statement opens
// nothing for a tenant that does not exist, with no foreign key (migration 00068): only a
// Stripe operation locks its tenant's row, which SetStripeAccount relies on, so the other
// kinds' calls pay no lock on the row all of a tenant's calls share. The opening's audit
// entry is the operation's creation, which the audit trail's reads in ops/pg/deskstore list
// as its opening (openingCols): no audit row repeats it.
// The provider key is written from the id, ops.ProviderKeyFor's form, whatever key p.Op
// names: no opening can take another operation's key, so the key is unique because the id
// is (ops rule 3), and operations_provider_key_legacy_idx, which holds only the keys not
// derived so (migration 00075), takes no entry at the insert or at any later write.
// The model a new operation asks for, and whether its client sent store: false, are copied
// from its request's body, where the gateway and the pipeline jobs both keep the body they
// send, so that they outlive the purge of the request as p.API does: a purged call that
// opted out of the provider's store is still never looked up there (ops rule 12).
func (db *DB) Open(ctx context.Context, p ops.OpenParams) (ops.Opened, error) {
	op := p.Op
	claimed := p.Claim != ""
	args := pgx.NamedArgs{
		"id": op.ID, "tenant": op.TenantID, "kind": string(op.Kind), "provider": op.Provider,
		"intent": op.IntentKey, "fp": op.Fingerprint,
		"order": op.OrderRef, "customer": op.CustomerRef, "chat": op.ChatRef, "payment": op.PaymentRef,
		"amount": op.AmountCents, "currency": op.Currency, "request": jsonOrNil(op.Request),
		"claim": p.Claim, "claimed": claimed, "lease": nullTime(claimed, p.LeaseUntil), "retry_until": op.RetryUntil,
		"retention": int64(op.Retention / time.Second), "retry_uncertain": op.Policy.RetryUncertain,
		"no_provider_key": op.Policy.NoProviderKey, "has_lookup": op.Policy.HasLookup, "api": p.API, "now": p.Now, "ref": p.RequestRef,
		"guarded": p.Latest != nil, "latest": "", "request_id": reqlog.Get(ctx, reqlog.RequestID),
	}
	if p.Latest != nil {
		args["latest"] = *p.Latest
	}
	var out ops.Opened
	var existed bool
	var attemptID int64
	var o *ops.Operation
	var err error
	// A caller that named no operation it saw asks for whatever the intent is now: losing the
	// race for the next number to a request that committed a moment ago is answered by
	// running the statement again, which then joins that request's operation. A caller that
	// named one is told its view is stale.
	for try := 0; try == 0 || (try < 3 && p.Latest == nil && intentRaced(err)); try++ {
		err = db.group.queryRow(openQuery, args, lockKey(true, strconv.FormatInt(op.TenantID, 10), string(op.Kind), op.IntentKey), func(row pgx.Row) (err error) {
			o, err = scanOp(row, &existed, &out.ClientRequestID, &attemptID)
			return err
		})
	}
	if errors.Is(err, pgx.ErrNoRows) && !db.tenantExists(op.TenantID) {
		return out, &ops.Error{Code: ops.EINVALID, Message: "The request breaks a rule of the ledger.", Err: fmt.Errorf("open operation: no tenant %d", op.TenantID)}
	}
	if (errors.Is(err, pgx.ErrNoRows) && p.Latest != nil) || intentRaced(err) {
		return out, &ops.Error{Code: ops.ECONFLICT, Reason: ops.ReasonSuperseded, Message: "A newer operation of this intent appeared meanwhile."}
	}
	if err != nil {
		return out, interpret(err, "open operation")
	}
	if !existed {
		o.Request = op.Request
	}
	out.Op, out.Created = o, !existed
	if attemptID > 0 {
		out.Attempt = &ops.Attempt{ID: attemptID, OperationID: o.ID, N: 1, ProviderKey: o.ProviderKey, Owner: p.Claim, StartedAt: p.Now}
	}
	return out, nil
}

// tenantExists tells an opening that found no row for want of its tenant from one that lost
// to a newer operation. It is asked only when the opening wrote nothing; an error counts as
// existing, so the opening reports what it did before.
func (db *DB) tenantExists(id int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var ok bool
	if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)`, id).Scan(&ok); err != nil {
		return true
	}
	return ok
}
