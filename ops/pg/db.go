// Package pg is the Postgres store of the ledger: the pool, the migrations, the ledger's
// statements and the outbox. Every SQL statement of Settle lives here or in a use case's store
// under ops/pg/ (accountstore, alertstore, deskstore, jobstore, purgestore, reconstore,
// retainstore, rollupstore), which builds on this package's pool and its shared helpers
// (shared.go, shared_ops.go). This package imports no use case: internal/layering's test
// forbids it.
package pg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/settle-dev/settle/migrations"
	"github.com/settle-dev/settle/ops"
)

// DB is a connection pool to Settle's database.
type DB struct {
	Pool *pgxpool.Pool
	// writes carries the ledger's group-committed statements when they are prepared
	// (see ledgerWritePool); nil when they share Pool.
	writes *pgxpool.Pool
	group  *group
}

// Option adjusts the pool's configuration before it connects.
type Option func(*pgxpool.Config)

// WithAsyncCommit lets the pool's commits return before their WAL reaches the disk: for
// bulk writes whose loss in a crash costs nothing (the demo's history), never for a
// server's ledger.
func WithAsyncCommit() Option {
	return func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["synchronous_commit"] = "off" }
}

// WithTracer hands every statement to t as it starts and ends: benchmarks use it to tell
// the time spent in the ledger's statements from the rest of a request.
func WithTracer(t pgx.QueryTracer) Option {
	return func(c *pgxpool.Config) { c.ConnConfig.Tracer = t }
}

// Open connects to url and checks the server answers. Statements are sent so that a pooler
// in transaction mode may stand between Settle and Postgres (see poolerSafeExecMode),
// unless url sets default_query_exec_mode.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &ops.Error{Code: ops.EINVALID, Message: "The database URL is malformed; expected postgres://user@host:port/db.", Err: err}
	}
	if !namesExecMode(url) {
		cfg.ConnConfig.DefaultQueryExecMode = poolerSafeExecMode
	}
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database at %s:%d is unreachable: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	writes, err := ledgerWritePool(ctx, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	ledgerPool := pool
	if writes != nil {
		ledgerPool = writes
	}
	return &DB{Pool: pool, writes: writes, group: newGroup(ledgerPool)}, nil
}

// SetGroupCommit sets how many batches of concurrent ledger writes may be at the server at
// once (default 2); 0 sends every write on its own. Call it before any write.
func (db *DB) SetGroupCommit(flushers int) { db.group.flushers = flushers }

// WriteBacklog is how long the oldest ledger write waiting for a group-commit batch has
// waited (0 when none waits): the first figure to grow when the database or this process's
// CPU cannot keep up, since every API request that does anything writes the ledger first.
// It is wall-clock latency on the monotonic clock, not the ledger's injected clock. With
// group commit off (SetGroupCommit(0)) writes queue only in the pool, which this does not
// see, so it is always 0. It takes one short lock: cheap enough to read on every request.
func (db *DB) WriteBacklog() time.Duration { return db.group.backlog() }

// Close closes the pools.
func (db *DB) Close() {
	if db.writes != nil {
		db.writes.Close()
	}
	db.Pool.Close()
}

func (db *DB) goose(ctx context.Context, opts ...goose.ProviderOption) (*goose.Provider, *sql.DB, error) {
	sqldb := stdlib.OpenDBFromPool(db.Pool)
	sub, err := fs.Sub(migrations.FS, ".")
	if err != nil {
		return nil, nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqldb, sub, opts...)
	if err != nil {
		sqldb.Close()
		return nil, nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, sqldb, nil
}

// Migrate applies every pending migration, under a lock that lets one process migrate at a
// time (see migrationLock).
func (db *DB) Migrate(ctx context.Context) error {
	locker, err := migrationLock()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p, sqldb, err := db.goose(ctx, locker)
	if err != nil {
		return err
	}
	defer sqldb.Close()
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// SchemaStatus returns the database's schema version and the newest this binary knows.
func (db *DB) SchemaStatus(ctx context.Context) (current, latest int64, err error) {
	p, sqldb, err := db.goose(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer sqldb.Close()
	// goose creates its version table to read it: a database without one, most likely not
	// Settle's at all (a mistaken DATABASE_URL), is at version 0 and is left as it is.
	var versioned bool
	if err := db.Pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&versioned); err != nil {
		return 0, 0, fmt.Errorf("read schema version: %w", err)
	}
	if !versioned {
		if sources := p.ListSources(); len(sources) > 0 {
			latest = sources[len(sources)-1].Version
		}
		return 0, latest, nil
	}
	current, latest, err = p.GetVersions(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read schema version: %w", err)
	}
	return current, latest, nil
}

// CheckSchema returns an error unless the schema is at the newest version.
func (db *DB) CheckSchema(ctx context.Context) error {
	cur, latest, err := db.SchemaStatus(ctx)
	if err != nil {
		return err
	}
	if cur < latest {
		return ops.Errorf(ops.ECONFLICT, "database schema is at version %d, this binary needs %d: run 'settle migrate' or start with --migrate", cur, latest)
	}
	return nil
}

// Ping checks the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.Pool.Ping(ctx) }

// ErrReadOnly means the database answers but takes no writes: a standby that has not been
// promoted, or a server set read-only.
var ErrReadOnly = errors.New("the database answers but is read-only (a standby, or default_transaction_read_only)")

// Writable returns nil when a session of the pool can write: a primary answers and is not
// read-only. During a failover a standby answers reads before it is promoted while every
// write of Settle's would fail, so readiness asks this rather than a ping. With several hosts
// in DATABASE_URL and target_session_attrs=read-write, pgx connects only to the writable one.
func (db *DB) Writable(ctx context.Context) error {
	var readOnly bool
	err := db.Pool.QueryRow(ctx, `SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'`).Scan(&readOnly)
	if err != nil {
		return fmt.Errorf("ask whether the database takes writes: %w", err)
	}
	if readOnly {
		return ErrReadOnly
	}
	return nil
}
