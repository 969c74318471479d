package ops

import (
	"context"
	"regexp"
	"strconv"
	"time"
)

// Tenant is the customer boundary: every key, fingerprint and lookup is scoped by it.
type Tenant struct {
	ID                    int64
	Name                  string
	RequireIdempotencyKey bool
	// StripeAccount is the Stripe connected account (acct_…) the tenant is bound to, "" for
	// none. A bound tenant's Stripe calls all carry it, so it sees only that account's
	// payments, and only records and webhooks from that account may change its operations.
	StripeAccount string
	// LLMBudgetMicros is what the tenant's LLM calls may cost per UTC day, in micro-units of
	// the currency of the gateway's price table; 0: no budget, and its calls are not checked.
	LLMBudgetMicros int64
	CreatedAt       time.Time
}

// stripeAccountRe mirrors the CHECK on tenants.stripe_account.
var stripeAccountRe = regexp.MustCompile(`^acct_[A-Za-z0-9]{1,250}$`)

// CheckStripeAccount refuses what is not a Stripe account id, before it can be stored and
// sent as a header: a typo would otherwise send a tenant's refunds to an account that is not
// its own, or to none.
func CheckStripeAccount(account string) error {
	if !stripeAccountRe.MatchString(account) {
		return &Error{Code: EINVALID, Reason: "invalid_stripe_account",
			Message: "A Stripe account id is acct_ followed by letters and digits, such as acct_1032D82eZvKYlo2C; " + quoteShort(account) + " is not one."}
	}
	return nil
}

// quoteShort quotes s for a message, cut to a length a terminal line holds.
func quoteShort(s string) string {
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return strconv.Quote(s)
}

// TenantStore keeps tenants and their API tokens.
type TenantStore interface {
	// EnsureTenant returns the tenant with that name, creating it if needed.
	EnsureTenant(ctx context.Context, name string) (*Tenant, error)
	// CreateToken makes a new API token for a tenant and returns it; only its hash is kept.
	CreateToken(ctx context.Context, tenantID int64, name string) (string, error)
	// TenantByToken returns the tenant a bearer token belongs to, or EUNAUTHORIZED.
	TenantByToken(ctx context.Context, token string) (*Tenant, error)
	// Tenants lists every tenant by name.
	Tenants(ctx context.Context) ([]*Tenant, error)
}

// BudgetChange is what a change of a tenant's LLM budget did: the tenant as it is now, its
// budget before, and whether anything changed (setting the budget it has changes nothing).
type BudgetChange struct {
	Tenant  *Tenant
	Before  int64
	Changed bool
}

// TenantDay is a tenant as the dashboard's tenants page shows it: its settings, and what its
// LLM operations opened on one UTC day cost in one currency, in micro-units, which is the
// spend its budget is checked against.
type TenantDay struct {
	Tenant *Tenant
	// Approvals are the tenant's own approval settings; nil: the server's apply.
	Approvals *TenantApprovals
	// Spent is what the day's calls cost as far as Read says they were read.
	Spent int64
	Read  SpendRead
}

// SpendRead says how much of a tenant's day a read of its spend summed (TenantDay.Read).
type SpendRead int

const (
	// SpendWhole: every call of the day; Spent is the figure the budget check reads.
	SpendWhole SpendRead = iota
	// SpendAtLeast: the read stopped at its bound of calls (SpendBound.Calls); Spent is what
	// the calls it read cost, so the day cost at least that.
	SpendAtLeast
	// SpendNotRead: the read ran out of time (SpendBound.Time); Spent says nothing.
	SpendNotRead
)

// SpendBound bounds a read of many tenants' spend for people to look at (the tenants page,
// 'settle tenant list'): a busy tenant's day holds hundreds of thousands of calls by evening,
// and a page must answer whatever they are. The budget check bounds its own reads otherwise:
// it reads one tenant, and trusts a slow read longer.
type SpendBound struct {
	// Calls is the most calls of one tenant summed; past it the tenant's figure is a floor.
	Calls int
	// Time is the longest the read of every tenant's spend may take; past it none is read.
	Time time.Duration
}

// DefaultSpendBound is the bound of the tenants page and 'settle tenant list'.
var DefaultSpendBound = SpendBound{Calls: 100_000, Time: 2 * time.Second}

// OrDefault is b with DefaultSpendBound's value for each field not above zero.
func (b SpendBound) OrDefault() SpendBound {
	if b.Calls <= 0 {
		b.Calls = DefaultSpendBound.Calls
	}
	if b.Time <= 0 {
		b.Time = DefaultSpendBound.Time
	}
	return b
}

// RefusalShare is how many client requests of one tenant and kind were received in a
// window, and how many of them were refused for one reason: enough to tell a tenant whose
// requests are mostly refused (stopped) from one that sent one bad request among many.
type RefusalShare struct {
	TenantID int64
	Kind     Kind
	Requests int64
	Refused  int64
}
