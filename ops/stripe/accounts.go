package stripe

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/settle-dev/settle/ops"
)

// Accounts says which Stripe connected account each tenant is bound to
// (ops.Tenant.StripeAccount); the Postgres store is one. The adapter asks on every call
// rather than caching. An operation's attempts and lookups go to the account recorded on it
// when it was opened (ops.Operation.StripeAccount), so a move of its tenant never sends them
// elsewhere; only one opened before accounts were recorded asks the current binding.
type Accounts interface {
	// StripeAccountOf returns the connected account a tenant is bound to, "" for none.
	StripeAccountOf(ctx context.Context, tenantID int64) (string, error)
	// StripeAccounts returns every bound connected account with its tenant's id.
	StripeAccounts(ctx context.Context) (map[string]int64, error)
	// SentStripeAccounts returns the connected accounts that Stripe operations opened in
	// [from, to) were sent to, bound to a tenant now or not.
	SentStripeAccounts(ctx context.Context, from, to time.Time) ([]string, error)
}

// opAccount is the account the operation's calls go to: the one recorded when it was opened,
// whatever its tenant is bound to now, so that its attempts and lookups ask the account that
// holds its refund (ops rule 9). One opened before accounts were recorded goes to its
// tenant's current account, where it was sent, since a tenant with open operations is never
// moved.
func (a *Adapter) opAccount(ctx context.Context, op *ops.Operation) (string, error) {
	if account, ok := op.SentAccount(); ok {
		return account, nil
	}
	return a.accountOf(ctx, op.TenantID)
}

// accountOf is the account a tenant's calls go to, "" for the platform account. A binding
// that cannot be read stops the call: sending or reading in the platform account instead
// would act on payments that are not the tenant's, or miss its own.
func (a *Adapter) accountOf(ctx context.Context, tenantID int64) (string, error) {
	if a.cfg.Accounts == nil || tenantID == 0 {
		return "", nil
	}
	account, err := a.cfg.Accounts.StripeAccountOf(ctx, tenantID)
	if err != nil {
		return "", &ops.Error{Code: ops.EUNAVAILABLE, Message: "The tenant's Stripe account could not be read; try again shortly.", Err: err}
	}
	return account, nil
}

// ListRefunds hands each every refund created in [from, to) for reconciliation, a batch
// at a time: the platform account's, then each connected account's, each record naming its
// account. An account that cannot be listed does not stop the others; its error comes back
// with the rest listed. An error from each stops the listing and is returned alone.
func (a *Adapter) ListRefunds(ctx context.Context, from, to time.Time, each func([]ops.ProviderRecord) error) error {
	accounts, err := a.listedAccounts(ctx, from, to)
	if err != nil {
		return err
	}
	var errs []error
	var applyErr error
	apply := func(batch []ops.ProviderRecord) error {
		applyErr = each(batch)
		return applyErr
	}
	for _, account := range accounts {
		err := a.listAccount(ctx, account, from, to, apply)
		if applyErr != nil {
			return applyErr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list the refunds of %s: %w", accountName(account), err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// listedAccounts are the accounts whose refunds of [from, to) are listed: the platform
// account, every bound connected account, and every account an operation that may have sent
// in the window was sent to. A tenant moved to another account leaves refunds in its old one
// that its operations own, and a refund failed there must still be seen (ops rules 9 and 12);
// operations opened up to the key retention before the window may have resent into it.
func (a *Adapter) listedAccounts(ctx context.Context, from, to time.Time) ([]string, error) {
	if a.cfg.Accounts == nil {
		return []string{""}, nil
	}
	bound, err := a.cfg.Accounts.StripeAccounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the bound stripe accounts: %w", err)
	}
	sent, err := a.cfg.Accounts.SentStripeAccounts(ctx, from.Add(-a.cfg.Retention), to)
	if err != nil {
		return nil, fmt.Errorf("list the stripe accounts refunds were sent to: %w", err)
	}
	set := map[string]bool{}
	for account := range bound {
		set[account] = true
	}
	for _, account := range sent {
		set[account] = true
	}
	delete(set, "")
	return append([]string{""}, slices.Sorted(maps.Keys(set))...), nil
}

// accountName names an account in messages.
func accountName(account string) string {
	if account == "" {
		return "the platform account"
	}
	return "connected account " + account
}

// listAccount lists one account's refunds of [from, to) in parts of the window read at
// once, newest first within each part, handing each batch on under a lock so each is never
// called twice at a time. A part that fails does not stop the others; an error from each
// stops them all.
func (a *Adapter) listAccount(ctx context.Context, account string, from, to time.Time, each func([]ops.ProviderRecord) error) error {
	bounds := windowParts(from.Unix(), to.Unix(), a.cfg.ListParts)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var eachErr error
	serial := func(batch []ops.ProviderRecord) error {
		mu.Lock()
		defer mu.Unlock()
		if eachErr == nil {
			if eachErr = each(batch); eachErr != nil {
				cancel()
			}
		}
		return eachErr
	}
	errs := make([]error, len(bounds)-1)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			// Reconciliation is Settle's own work: it reads as tenant 0, not within a tenant's share.
			errs[i] = a.listEach(ctx, 0, account, &stripego.RefundListParams{CreatedRange: &stripego.RangeQueryParams{
				GreaterThanOrEqual: bounds[i], LesserThan: bounds[i+1]}}, serial)
		})
	}
	wg.Wait()
	if eachErr != nil {
		return eachErr
	}
	return errors.Join(errs...)
}

// windowParts cuts [from, to), in Unix seconds as Stripe's created filter takes them, into
// at most n parts of whole seconds (2 when n is 0), returned as their n+1 bounds.
func windowParts(from, to int64, n int) []int64 {
	if n <= 0 {
		n = 2
	}
	n = int(min(int64(n), max(to-from, 1)))
	bounds := make([]int64, n+1)
	for i := range n {
		bounds[i] = from + (to-from)*int64(i)/int64(n)
	}
	bounds[n] = to
	return bounds
}
