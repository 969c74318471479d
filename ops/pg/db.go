// Package pg is the Postgres store of the ledger: every SQL statement of Settle lives here.
package pg

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/settle-dev/settle/migrations"
	"github.com/settle-dev/settle/ops"
)

// DB is a connection pool to Settle's database.
type DB struct {
	Pool  *pgxpool.Pool
	group *group
}

// Open connects to url and checks the server answers.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &ops.Error{Code: ops.EINVALID, Message: "The database URL is malformed; expected postgres://user@host:port/db.", Err: err}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database at %s:%d is unreachable: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return &DB{Pool: pool, group: newGroup(pool)}, nil
}

// SetGroupCommit sets how many batches of concurrent ledger writes may be at the server at
// once (default 2); 0 sends every write on its own. Call it before any write.
func (db *DB) SetGroupCommit(flushers int) { db.group.flushers = flushers }

// Close closes the pool.
func (db *DB) Close() { db.Pool.Close() }

func (db *DB) goose(ctx context.Context) (*goose.Provider, *sql.DB, error) {
	sqldb := stdlib.OpenDBFromPool(db.Pool)
	sub, err := fs.Sub(migrations.FS, ".")
	if err != nil {
		return nil, nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqldb, sub)
	if err != nil {
		sqldb.Close()
		return nil, nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, sqldb, nil
}

// Migrate applies every pending migration.
func (db *DB) Migrate(ctx context.Context) error {
	p, sqldb, err := db.goose(ctx)
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
