package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTokenRevokeTwiceSaysItWasRevokedAlready: an operator who revokes a token that is
// revoked already (a second run of an incident's script, the wrong id from an old list) is
// told so in one line and gets a failing exit status; the first revocation's time and its
// one audit row stay as they were.
func TestTokenRevokeTwiceSaysItWasRevokedAlready(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url, token := shopDatabase(t, "agent")
	var id int64
	if err := db.Pool.QueryRow(ctx, `SELECT id FROM api_tokens`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"DATABASE_URL": url}
	args := []string{"token", "revoke", "--id", strconv.FormatInt(id, 10)}
	if code, stdout, stderr := run(t, args, vars, ""); code != 0 || !strings.HasPrefix(stdout, "revoked "+token[:8]) {
		t.Fatalf("first revoke: exit %d: %s%s", code, stdout, stderr)
	}
	var first time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT revoked_at FROM api_tokens WHERE id = $1`, id).Scan(&first); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := run(t, args, vars, "")
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "settle: ") ||
		!strings.Contains(stderr, "revoked already") || !strings.Contains(stderr, first.UTC().Format(time.RFC3339)) || !strings.Contains(stderr, "nothing changed") {
		t.Errorf("second revoke: exit %d, stdout %q, stderr %q; want 1 and one line saying it was revoked already, when, and that nothing changed", code, stdout, stderr)
	}
	var again time.Time
	var audited int
	if err := db.Pool.QueryRow(ctx, `SELECT revoked_at, (SELECT count(*) FROM audit_log WHERE action = 'token.revoke') FROM api_tokens WHERE id = $1`, id).Scan(&again, &audited); err != nil {
		t.Fatal(err)
	}
	if !again.Equal(first) || audited != 1 {
		t.Errorf("after the second revoke: revoked at %s (first %s), %d audit rows; want the first time and 1 row", again, first, audited)
	}
}
