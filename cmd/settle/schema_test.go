package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestAdminCommandsRefuseADatabaseWithoutTheSchema: DATABASE_URL naming the wrong database
// (the server's postgres database, a new one not yet migrated) made 'token add', 'user add'
// and the tenant commands fail with "internal: Internal error.: issue token: ERROR: relation
// "tenants" does not exist (SQLSTATE 42P01)", and a database a few migrations behind would
// have them write to a schema they were not made for. Each command checks the schema first,
// as serve, reconcile and retention do: one line saying the database holds no Settle schema,
// exit 1, and the database is left as it was, without so much as a version table.
func TestAdminCommandsRefuseADatabaseWithoutTheSchema(t *testing.T) {
	t.Parallel()
	pgtest.NewDatabase(t) // starts the test cluster
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE not_settle"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if a, err := pgx.Connect(ctx, pgtest.URL("postgres")); err == nil {
			a.Exec(ctx, "DROP DATABASE IF EXISTS not_settle WITH (FORCE)")
			a.Close(ctx)
		}
	})
	vars := map[string]string{"DATABASE_URL": pgtest.URL("not_settle")}
	for _, args := range [][]string{
		{"token", "add", "--tenant", "shop"}, {"token", "list"}, {"token", "revoke", "--id", "1"},
		{"user", "add", "--email", "sam@example.com", "--role", "admin"},
		{"tenant", "list"}, {"tenant", "approvals", "shop", "--min-cents", "5000"}, {"tenant", "stripe-account", "shop", "acct_1"},
	} {
		code, stdout, stderr := run(t, args, vars, "a password of some length\n")
		if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "no Settle schema") ||
			strings.Contains(stderr, "SQLSTATE") || strings.Contains(stderr, "nternal") {
			t.Errorf("settle %v: exit %d, stdout %q, stderr %q; want 1 and one line saying the database holds no Settle schema", args, code, stdout, stderr)
		}
	}
	conn, err := pgx.Connect(ctx, pgtest.URL("not_settle"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables []string
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`)
	if err != nil {
		t.Fatal(err)
	}
	if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(tables) > 0 {
		t.Errorf("the refused commands left tables %v (%v) in a database that is not Settle's", tables, err)
	}
}
