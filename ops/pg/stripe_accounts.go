package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
)

// stripeProvider is the provider name of Stripe operations; a tenant's connected account
// binds only its calls at Stripe.
const stripeProvider = "stripe"

// StripeBinding is what SetStripeAccount did: the tenant as it is now, and the account it
// was bound to before ("" for none).
type StripeBinding struct {
	Tenant  *ops.Tenant
	Before  string
	Changed bool
}

// SetStripeAccount binds the tenant named name to a Stripe connected account, or unbinds it
// when account is "", and records who did it in the audit log, in one transaction. Setting
// the binding a tenant already has changes and records nothing.
//
// A binding moves every Stripe call of the tenant to another account, resends and lookups
// included, and an idempotency key means nothing in another account: a resend there could
// refund a second time, and a lookup there finds nothing. So the binding is refused while
// the tenant has an open Stripe operation. The tenant row is locked first, and opening a
// Stripe operation takes a key-share lock on it (Open), so no Stripe operation opens between
// the count and the change.
func (db *DB) SetStripeAccount(ctx context.Context, name, account, actor string, now time.Time) (StripeBinding, error) {
	if err := checkTenantName(name); err != nil {
		return StripeBinding{}, err
	}
	if account != "" {
		if err := ops.CheckStripeAccount(account); err != nil {
			return StripeBinding{}, err
		}
	}
	var b StripeBinding
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		t, err := lockTenantNamed(ctx, tx, name)
		if err != nil {
			return err
		}
		b = StripeBinding{Tenant: t, Before: t.StripeAccount}
		if t.StripeAccount == account {
			return nil
		}
		if err := checkRebind(ctx, tx, t, account); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE tenants SET stripe_account = nullif($2, '') WHERE id = $1`, t.ID, account); err != nil {
			if sqlState(err) == "23505" {
				return &ops.Error{Code: ops.ECONFLICT, Message: fmt.Sprintf("Stripe account %s is bound to another tenant.", account), Err: err}
			}
			return interpret(err, "bind stripe account")
		}
		_, err = tx.Exec(ctx, `INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after)
VALUES ($1, $2, 'tenant.stripe_account', 'tenant', $3::bigint::text,
	jsonb_build_object('tenant', $4::text, 'stripe_account', nullif($5, '')),
	jsonb_build_object('tenant', $4::text, 'stripe_account', nullif($6, '')))`,
			now, actor, t.ID, t.Name, t.StripeAccount, account)
		if err != nil {
			return interpret(err, "audit stripe account binding")
		}
		t.StripeAccount, b.Changed = account, true
		return nil
	})
	return b, err
}

// checkRebind refuses to move tenant t to account while another tenant holds that account
// or t has an open Stripe operation, saying which and how many.
func checkRebind(ctx context.Context, tx pgx.Tx, t *ops.Tenant, account string) error {
	if account != "" {
		var holder string
		err := tx.QueryRow(ctx, `SELECT name FROM tenants WHERE stripe_account = $1 AND id <> $2`, account, t.ID).Scan(&holder)
		if err == nil {
			return ops.Errorf(ops.ECONFLICT, "Stripe account %s is bound to tenant %s; one account belongs to one tenant.", account, holder)
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return interpret(err, "find the account's tenant")
		}
	}
	var open int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM operations WHERE tenant_id = $1 AND provider = $2 AND status IN `+openStatuses,
		t.ID, stripeProvider).Scan(&open); err != nil {
		return interpret(err, "count open stripe operations")
	}
	if open > 0 {
		return ops.Errorf(ops.ECONFLICT, "Tenant %s has %d open Stripe operations; their resends and lookups must stay in the account they were sent to. Close them on /ops first, then change the binding.", t.Name, open)
	}
	return nil
}

// StripeAccountOf returns the Stripe connected account a tenant is bound to, "" for none
// (or for no such tenant, which has no operations either). It is read on every call, never
// cached: every attempt and lookup of an operation must go to one account, which the
// refusal in SetStripeAccount guarantees only when nobody acts on an older binding.
func (db *DB) StripeAccountOf(ctx context.Context, tenantID int64) (string, error) {
	var account string
	err := db.Pool.QueryRow(ctx, `SELECT coalesce(stripe_account, '') FROM tenants WHERE id = $1`, tenantID).Scan(&account)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", interpret(err, "read the tenant's stripe account")
	}
	return account, nil
}

// StripeAccounts returns every bound Stripe connected account with its tenant's id, for
// the reconciler, which lists each account's refunds.
func (db *DB) StripeAccounts(ctx context.Context) (map[string]int64, error) {
	rows, err := db.Pool.Query(ctx, `SELECT stripe_account, id FROM tenants WHERE stripe_account IS NOT NULL ORDER BY stripe_account`)
	if err != nil {
		return nil, interpret(err, "list stripe accounts")
	}
	out := map[string]int64{}
	var account string
	var id int64
	_, err = pgx.ForEachRow(rows, []any{&account, &id}, func() error {
		out[account] = id
		return nil
	})
	if err != nil {
		return nil, interpret(err, "list stripe accounts")
	}
	return out, nil
}

// SentStripeAccounts returns the connected accounts that Stripe operations opened in
// [from, to) were sent to, for the reconciler, which keeps listing a moved tenant's old
// account while its operations may have refunds there. It reads the window through
// operations_created_idx; operations opened before accounts were recorded name none.
func (db *DB) SentStripeAccounts(ctx context.Context, from, to time.Time) ([]string, error) {
	rows, err := db.Pool.Query(ctx, `SELECT DISTINCT stripe_account FROM operations
WHERE created_at >= $1 AND created_at < $2 AND provider = $3 AND stripe_account <> '' ORDER BY stripe_account`,
		from, to, stripeProvider)
	if err != nil {
		return nil, interpret(err, "list the stripe accounts operations were sent to")
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, interpret(err, "list the stripe accounts operations were sent to")
	}
	return out, nil
}

// ProviderAccount implements ops.EventStore: the account a tenant's calls at a provider go
// to. Only Stripe has accounts of its own per tenant; every other provider answers "".
func (db *DB) ProviderAccount(ctx context.Context, tenantID int64, provider string) (string, error) {
	if provider != stripeProvider {
		return "", nil
	}
	return db.StripeAccountOf(ctx, tenantID)
}
