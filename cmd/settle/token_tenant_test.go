package main

import (
	"context"
	"strconv"
	"testing"
)

// TestTokenAddRefusesATenantsIDForItsName: 'token add --tenant 1', typed from the ID column of
// 'tenant list', made a new tenant named "1" and issued it a token, so the client given it
// worked under a tenant of its own, outside shop's operations, limits and approvals. A name
// that no tenant has but that is the id of one is refused in one line naming that tenant,
// with exit 2, and makes no tenant and no token.
func TestTokenAddRefusesATenantsIDForItsName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url, _ := shopDatabase(t, "agent")
	shop, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"token", "add", "--tenant", strconv.FormatInt(shop.ID, 10)}
	code, stdout, stderr := run(t, args, map[string]string{"DATABASE_URL": url}, "")
	refusedInOneLine(t, args, code, stdout, stderr, "--tenant shop")
	var tenants, tokens int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM tenants), (SELECT count(*) FROM api_tokens)`).Scan(&tenants, &tokens); err != nil {
		t.Fatal(err)
	}
	if tenants != 1 || tokens != 1 {
		t.Errorf("after 'token add --tenant %d': %d tenants, %d tokens; want shop and its one token", shop.ID, tenants, tokens)
	}
}
