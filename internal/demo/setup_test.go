package demo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestSetupRunsAgainOnItsOwnDatabase: a second demo on the first one's database keeps its
// people and tenant, and the tenant's LLM budget as an admin left it, and gets a new token
// of its own, and the banner names every person with the password and the token to use.
func TestSetupRunsAgainOnItsOwnDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	first, firstToken, err := Setup(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, token, err := Setup(ctx, db, nil)
	if err != nil || again.ID != first.ID || token == firstToken {
		t.Fatalf("the second setup: tenant %v (first %d), new token %v, %v", again, first.ID, token != firstToken, err)
	}
	if first.LLMBudgetMicros != demoBudgetMicros {
		t.Errorf("the new demo tenant's LLM budget is %d, want %d, so /tenants shows its spend against one", first.LLMBudgetMicros, int64(demoBudgetMicros))
	}
	// A budget an admin changed on /tenants stays as they left it.
	if _, err := db.SetLLMBudget(ctx, tenantName, 0, "admin@demo.settle", time.Now()); err != nil {
		t.Fatal(err)
	}
	if again, _, err := Setup(ctx, db, nil); err != nil || again.LLMBudgetMicros != 0 {
		t.Errorf("a third setup set the removed budget again: %v, %v", again, err)
	}
	for _, tok := range []string{firstToken, token} {
		if tn, err := db.TenantByToken(ctx, tok); err != nil || tn.Name != tenantName {
			t.Fatalf("a demo token names %v, %v", tn, err)
		}
	}
	roles := map[desk.Role]bool{}
	for _, u := range people {
		got, err := accountstore.New(db).Authenticate(ctx, u.email, password)
		if err != nil || got.Role != u.role {
			t.Fatalf("%s signs in as %v, %v; want %s", u.email, got, err, u.role)
		}
		roles[u.role] = true
	}
	if len(roles) != 4 {
		t.Fatalf("the demo's people hold %d roles, want one of each of the four", len(roles))
	}
	var b strings.Builder
	PrintBanner(&b, "http://127.0.0.1:8080", token, "/tmp/demo-pg")
	for _, want := range append([]string{"http://127.0.0.1:8080", token, "/tmp/demo-pg", password}, emails()...) {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the banner does not say %q:\n%s", want, b.String())
		}
	}
}

func emails() []string {
	var out []string
	for _, u := range people {
		out = append(out, u.email)
	}
	return out
}
