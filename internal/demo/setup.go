package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/accountstore"
)

// tenantName is the demo's tenant.
const tenantName = "demo"

// password signs in every one of the demo's people.
const password = "settle-demo"

// people are the demo's logins, one per role.
var people = []struct {
	email string
	role  desk.Role
}{
	{"oncall@demo.settle", desk.RoleOncall},
	{"support@demo.settle", desk.RoleSupport},
	{"manager@demo.settle", desk.RoleManager},
	{"admin@demo.settle", desk.RoleAdmin},
}

// Setup gives a migrated database its demo people, one per role, and its tenant, with a
// fresh API token for the tenant, counting two steps on progress (nil counts nothing). A
// database that has them already keeps them: tokens are kept only as hashes, so each run
// makes a new one to show.
func Setup(ctx context.Context, db *pg.DB, progress Progress) (*ops.Tenant, string, error) {
	if progress == nil {
		progress = noProgress{}
	}
	for _, u := range people {
		_, err := accountstore.New(db).CreateUser(ctx, u.email, password, u.role)
		if err != nil && ops.ErrorCode(err) != ops.ECONFLICT {
			return nil, "", fmt.Errorf("create demo user %s: %w", u.email, err)
		}
	}
	progress.Add(1)
	tenant, token, err := budgetedTenant(ctx, db, tenantName, demoBudgetMicros)
	if err != nil {
		return nil, "", err
	}
	progress.Add(1)
	return tenant, token, nil
}

// demoBudgetMicros is the demo tenant's LLM budget a UTC day: ten units of the price table's
// currency, well above what its chat backend and pipeline spend in a day, so /tenants shows
// its spend against a budget while its calls go on.
const demoBudgetMicros = 10_000_000

// budgetedTenant issues a new API token of the tenant named name, making the tenant if it is
// new with an LLM budget of micros a UTC day, set as 'settle tenant budget' sets it. A
// tenant the demo made before keeps the budget it has: an admin may have changed it on
// /tenants.
func budgetedTenant(ctx context.Context, db *pg.DB, name string, micros int64) (*ops.Tenant, string, error) {
	tenants, err := db.Tenants(ctx)
	if err != nil {
		return nil, "", err
	}
	isNew := !slices.ContainsFunc(tenants, func(t *ops.Tenant) bool { return t.Name == name })
	token, err := accountstore.New(db).IssueToken(ctx, name, "demo", "cli", time.Now())
	if err != nil {
		return nil, "", err
	}
	if isNew {
		c, err := db.SetLLMBudget(ctx, name, micros, "cli", time.Now())
		if err != nil {
			return nil, "", fmt.Errorf("set the LLM budget of demo tenant %s: %w", name, err)
		}
		return c.Tenant, token, nil
	}
	tenant, err := db.EnsureTenant(ctx, name)
	return tenant, token, err
}

// PrintBanner tells the person who started the demo where it runs, how to sign in, the
// API token and where the data stays.
func PrintBanner(w io.Writer, url, token, dataDir string) {
	fmt.Fprintf(w, "Settle demo is running at %s\n\nSign in with any of these (password %q):\n", url, password)
	for _, u := range people {
		fmt.Fprintf(w, "  %-22s %s\n", u.email, u.role)
	}
	fmt.Fprintf(w, "\nAPI token for tenant %q:\n  %s\n\nThe data stays in %s. Press Ctrl-C to stop.\n", tenantName, token, dataDir)
}
