package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// refusedInOneLine fails t unless a command line was refused as Main promises a mistake is:
// exit status 2, nothing on stdout, and one line on stderr that starts with "settle: " and
// holds want.
func refusedInOneLine(t *testing.T, args []string, code int, stdout, stderr, want string) {
	t.Helper()
	if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "settle: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
		t.Errorf("settle %v: exit %d, stdout %q, stderr %q; want 2 and one line with %q", args, code, stdout, stderr, want)
	}
}

// TestAFlagGivenTwiceIsRefused: a flag given twice (an incident's command line pasted after
// another, an edited history line) is a mistake, not "the last one wins": 'token revoke --id
// 1 --id 2' revoked token 2 alone and said nothing of the 1, and 'token add --tenant shop
// --tenant bank' issued bank a token. Each is refused in one line with exit 2 before the
// database is touched: no token revoked, no tenant made, no token issued, no audit row.
func TestAFlagGivenTwiceIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url, _ := shopDatabase(t, "agent")
	shop, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateToken(ctx, shop.ID, "second"); err != nil {
		t.Fatal(err)
	}
	var first, second int64
	if err := db.Pool.QueryRow(ctx, `SELECT min(id), max(id) FROM api_tokens`).Scan(&first, &second); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"DATABASE_URL": url}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "revoke", "--id", strconv.FormatInt(first, 10), "--id", strconv.FormatInt(second, 10)}, "--id is given twice"},
		{[]string{"token", "revoke", "--id=" + strconv.FormatInt(second, 10), "-id", strconv.FormatInt(second, 10)}, "--id is given twice"},
		{[]string{"token", "add", "--tenant", "shop", "--tenant", "bank"}, "--tenant is given twice"},
		{[]string{"token", "add", "--tenant", "shop", "--name", "a", "--name", "b"}, "--name is given twice"},
		{[]string{"tenant", "approvals", "shop", "--min-cents", "5000", "--min-cents", "off"}, "--min-cents is given twice"},
		{[]string{"tenant", "stripe-account", "shop", "--clear", "--clear"}, "--clear is given twice"},
		{[]string{"user", "add", "--email", "a@b.example", "--role", "support", "--role", "admin"}, "--role is given twice"},
		{[]string{"reconcile", "--since", "1h", "--since", "2h"}, "--since is given twice"},
		{[]string{"retention", "run", "--dry-run", "--dry-run=false"}, "--dry-run is given twice"},
	} {
		code, stdout, stderr := run(t, tc.args, vars, "a password of some length\n")
		refusedInOneLine(t, tc.args, code, stdout, stderr, tc.want)
	}
	var tenants, tokens, revoked, users, audited, approvals int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM tenants), (SELECT count(*) FROM api_tokens),
		(SELECT count(*) FROM api_tokens WHERE revoked_at IS NOT NULL), (SELECT count(*) FROM users),
		(SELECT count(*) FROM audit_log), (SELECT count(*) FROM tenant_approvals)`).Scan(&tenants, &tokens, &revoked, &users, &audited, &approvals); err != nil {
		t.Fatal(err)
	}
	if tenants != 1 || tokens != 2 || revoked != 0 || users != 0 || audited != 0 || approvals != 0 {
		t.Errorf("after refused command lines: %d tenants, %d tokens (%d revoked), %d users, %d audit rows, %d approval settings; want 1, 2 (0), 0, 0, 0",
			tenants, tokens, revoked, users, audited, approvals)
	}
}
