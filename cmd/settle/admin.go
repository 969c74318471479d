package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/accountstore"
)

// openDB opens the configured database with the options every command uses.
func openDB(ctx context.Context, cfg Config) (*pg.DB, error) {
	return pg.Open(ctx, cfg.DatabaseURL, dbOptions(cfg)...)
}

// openChecked is openDB for a command that works on the schema as it is: it refuses a
// database not migrated to this binary's newest version.
func openChecked(ctx context.Context, cfg Config) (*pg.DB, error) {
	db, err := openDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := db.CheckSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// migrate brings the schema up to date.
func migrate(ctx context.Context, cfg Config, stdout io.Writer) error {
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	cur, _, err := db.SchemaStatus(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema at version %d\n", cur)
	return nil
}

// addUser reads the password from the first line of stdin, so it never appears in the
// shell history or the process list.
func addUser(ctx context.Context, cfg Config, stdin io.Reader, stdout io.Writer) error {
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read password: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		return usagef("user add: type the password as the first line of standard input")
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	u, err := accountstore.New(db).CreateUser(ctx, cfg.Email, password, cfg.Role)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "added user %s (%s)\n", u.Email, u.Role)
	return nil
}

// addToken prints the token as its last line so scripts can take it with tail -n1.
func addToken(ctx context.Context, cfg Config, stdout io.Writer) error {
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	token, err := ensureToken(ctx, db, cfg.Tenant, cfg.TokenName)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "API token for tenant %s (shown once; only its hash is kept):\n%s\n", cfg.Tenant, token)
	return nil
}

// ensureToken issues a token for tenant, creating the tenant if needed; the audit log
// names the command line as its issuer, as /admin/tokens names the admin.
func ensureToken(ctx context.Context, db *pg.DB, tenant, name string) (string, error) {
	return accountstore.New(db).IssueToken(ctx, tenant, name, "cli", time.Now())
}

// listTokens prints every API token, never the token itself: its first characters say
// which one it is.
func listTokens(ctx context.Context, cfg Config, stdout io.Writer) error {
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	tokens, err := accountstore.New(db).Tokens(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTENANT\tNAME\tSTARTS WITH\tISSUED\tLAST USED\tSTATE")
	for _, k := range tokens {
		state, used := "active", "never"
		if k.RevokedAt != nil {
			state = "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
		}
		if k.LastUsedAt != nil {
			used = k.LastUsedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s…\t%s\t%s\t%s\n", k.ID, k.Tenant, k.Name, k.Prefix, k.CreatedAt.UTC().Format(time.RFC3339), used, state)
	}
	return w.Flush()
}

// revokeToken revokes one token; the audit log names the command line as the actor.
func revokeToken(ctx context.Context, cfg Config, stdout io.Writer) error {
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	// In microseconds, as the store keeps it, so the time read back is this one exactly.
	now := time.Now().Truncate(time.Microsecond)
	k, err := accountstore.New(db).RevokeToken(ctx, cfg.TokenID, "cli", now)
	if err != nil {
		return err
	}
	// RevokeToken keeps the first revocation's time, so any other time means this run
	// changed nothing.
	if k.RevokedAt != nil && !k.RevokedAt.Equal(now) {
		return ops.Errorf(ops.ECONFLICT, "API token %s… of tenant %s (%s) was revoked already at %s; nothing changed.",
			k.Prefix, k.Tenant, k.Name, k.RevokedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(stdout, "revoked %s… of tenant %s (%s); servers refuse it within 5 s\n", k.Prefix, k.Tenant, k.Name)
	return nil
}
