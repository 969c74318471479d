package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/accountstore"
)

// openDB opens the configured database with the options every command uses.
func openDB(ctx context.Context, cfg Config) (*pg.DB, error) {
	return openPool(ctx, cfg, dbOptions(cfg)...)
}

// dbOpenTimeout bounds opening the database: a host that takes the connection and never
// answers (a hung server, a half-open firewall) would otherwise hold a command forever when
// DATABASE_URL sets no connect_timeout.
const dbOpenTimeout = 15 * time.Second

// openPool opens the configured database with opts, giving up after dbOpenTimeout.
func openPool(ctx context.Context, cfg Config, opts ...pg.Option) (*pg.DB, error) {
	openCtx, cancel := context.WithTimeout(ctx, dbOpenTimeout)
	defer cancel()
	db, err := pg.Open(openCtx, cfg.DatabaseURL, opts...)
	if err != nil {
		timedOut := ctx.Err() == nil && errors.Is(openCtx.Err(), context.DeadlineExceeded)
		return nil, openError(cfg.DatabaseURL, timedOut, err)
	}
	return db, nil
}

// openError says in one short line why the database at url could not be opened: pgx's own
// error is the chain of its attempts, each said twice when it tried with TLS and without,
// with SQLSTATE codes and the user's name. The cause stays wrapped for errors.Is.
func openError(url string, timedOut bool, err error) error {
	c, perr := pgx.ParseConfig(url)
	if perr != nil {
		return err // pg.Open said the URL is malformed, without repeating it
	}
	where := net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
	var pgErr *pgconn.PgError
	var opErr *net.OpError
	switch {
	case timedOut:
		return &openErr{fmt.Sprintf("the database at %s did not answer within %s; check that it is up and that DATABASE_URL names it", where, dbOpenTimeout), err}
	case errors.As(err, &pgErr):
		return &openErr{fmt.Sprintf("the database at %s refused the connection: %s", where, pgErr.Message), err}
	case errors.As(err, &opErr):
		return &openErr{fmt.Sprintf("the database at %s is unreachable: %v", where, opErr.Err), err}
	}
	return err
}

// openErr is a database that could not be opened: its message, and the cause it wraps.
type openErr struct {
	msg string
	err error
}

func (e *openErr) Error() string { return e.msg }
func (e *openErr) Unwrap() error { return e.err }

// openChecked is openDB for a command that works on the schema as it is, which is every
// command but migrate and those that may migrate: it refuses a database not migrated to this
// binary's newest version, before any statement of the command.
func openChecked(ctx context.Context, cfg Config) (*pg.DB, error) {
	db, err := openDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := db.CheckSchema(ctx); err != nil {
		if cur, _, serr := db.SchemaStatus(ctx); serr == nil && cur == 0 {
			err = noSchema(cfg.DatabaseURL)
		}
		db.Close()
		return nil, err
	}
	return db, nil
}

// noSchema is the error of a database that holds no Settle schema at all: most likely
// DATABASE_URL names another database of the server, where the commands' statements would
// fail one by one with Postgres's "relation does not exist".
func noSchema(url string) error {
	name := "the database"
	if c, err := pgx.ParseConfig(url); err == nil {
		name = fmt.Sprintf("the database %q at %s", c.Database, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))))
	}
	return fmt.Errorf("%s holds no Settle schema: check that DATABASE_URL names Settle's database, or create the schema with 'settle migrate'", name)
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
	db, err := openChecked(ctx, cfg)
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
	db, err := openChecked(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := refuseTenantID(ctx, db, cfg.Tenant); err != nil {
		return err
	}
	token, err := ensureToken(ctx, db, cfg.Tenant, cfg.TokenName)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "API token for tenant %s (shown once; only its hash is kept):\n%s\n", cfg.Tenant, token)
	return nil
}

// refuseTenantID refuses a --tenant that no tenant is named but that is the id of one, as
// 'tenant list' shows it: 'token add' would make a new tenant of that name, and its token
// would act outside the tenant meant.
func refuseTenantID(ctx context.Context, db *pg.DB, name string) error {
	id, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return nil
	}
	tenants, err := db.Tenants(ctx)
	if err != nil {
		return err
	}
	var byID *ops.Tenant
	for _, t := range tenants {
		if t.Name == name {
			return nil
		}
		if t.ID == id {
			byID = t
		}
	}
	if byID != nil {
		return usagef("token add: no tenant is named %s, which is the id of tenant %s; name the tenant: --tenant %s", name, byID.Name, byID.Name)
	}
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
	db, err := openChecked(ctx, cfg)
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
	db, err := openChecked(ctx, cfg)
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
