package demo

import (
	"context"
	"fmt"
	"io"
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
	token, err := accountstore.New(db).IssueToken(ctx, tenantName, "demo", "cli", time.Now())
	if err != nil {
		return nil, "", err
	}
	tenant, err := db.EnsureTenant(ctx, tenantName)
	if err != nil {
		return nil, "", err
	}
	progress.Add(1)
	return tenant, token, nil
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
