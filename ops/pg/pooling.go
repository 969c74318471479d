package pg

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// execModeParam is the connection string parameter pgx reads the statement mode from.
const execModeParam = "default_query_exec_mode"

// poolerSafeExecMode is how statements are sent unless the connection string says otherwise.
// A pooler in transaction mode (pgbouncer before 1.21, such as Debian 12's 1.18, or any
// pgbouncer without max_prepared_statements) hands each transaction to whichever server
// connection is free, so a named prepared statement made on one is missing on the next.
// Cache-describe sends each statement as an unnamed one, parsed with its execution in one
// round trip, and caches only its parameter and column types on the client: it works
// through such a pooler and directly alike. The price is a parse and plan per statement at
// the server (tens of microseconds on a small query); a direct connection may take
// default_query_exec_mode=cache_statement in DATABASE_URL back.
const poolerSafeExecMode = pgx.QueryExecModeCacheDescribe

// namesExecMode reports whether the connection string chooses the statement mode itself,
// in URL or keyword/value form.
func namesExecMode(connString string) bool {
	if u, err := url.Parse(connString); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return u.Query().Has(execModeParam)
	}
	return strings.Contains(connString, execModeParam)
}

// migrationLock is what Migrate holds while it applies migrations, so replicas started with
// --migrate together apply each one once. It is a row with a lease renewed by its holder,
// not a session advisory lock, which a pooler in transaction mode would hand to another
// client between the lock and its release; a holder that dies frees it when the lease
// runs out. Waiters look again every second, for up to ten minutes.
func migrationLock() (goose.ProviderOption, error) {
	l, err := lock.NewPostgresTableLocker(lock.WithTableName("settle_migration_lock"),
		lock.WithTableLeaseDuration(30*time.Second), lock.WithTableHeartbeatInterval(5*time.Second),
		lock.WithTableLockTimeout(time.Second, 600))
	if err != nil {
		return nil, err
	}
	return goose.WithLocker(l), nil
}

// PreparedWhenDirect sends statements as named prepared statements, parsed and planned once
// per connection (pgx's cache_statement), when nothing stands between Settle and Postgres,
// and leaves the pooler-safe mode otherwise. The ledger's two statements of a lifecycle are
// large common table expressions whose parse and plan cost the server about as much as
// running them, so on a direct connection preparing them is the cheaper way (docs/benchmarks/journal.md).
// An explicit default_query_exec_mode in the connection string wins.
//
// A pooler is told apart by the backend process id: Postgres announces its own at startup
// and pg_backend_pid() returns the same number, while a pooler such as pgbouncer announces
// an id of its own making (the cancel key it hands its clients) that no server process has.
// A failed probe keeps the pooler-safe mode.
func PreparedWhenDirect() Option {
	return func(c *pgxpool.Config) {
		if namesExecMode(c.ConnString()) {
			return
		}
		if direct(c.ConnConfig) {
			c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
		}
	}
}

// ledgerWritesConns bounds the write pool: one connection per group-commit flusher and
// room for the statements a failed batch re-runs one at a time.
const ledgerWritesConns = 4

// ledgerWritePool opens the pool that carries the ledger's two statements of a lifecycle
// (the admission and the checked transition) when PreparedWhenDirect found a direct
// connection, with plan_cache_mode=force_generic_plan; otherwise it returns nil and they
// share the main pool. A connection string that chooses the statement mode itself may name a
// pooler, which would refuse the startup parameter, so it gets no such pool.
//
// A prepared statement is planned anew for its parameters (a custom plan) as long as
// Postgres estimates that cheaper than one plan for every call (the generic plan). Those
// two statements are large common table expressions whose parts are switched on and off by
// their parameters (no evidence, no charge, no answer to store), so their custom plans can
// look cheaper, and when Postgres kept them, planning took a third of the server's time in a
// lifecycle (docs/benchmarks/journal.md); on a database with many months of partitions it also opened and
// locked every month. Their generic plan is the same index probes with the switches checked at
// run time. The setting stays off the main pool: the dashboard's queries choose partial
// indexes and partitions by their parameters, which only a custom plan can do. A
// plan_cache_mode set in the connection string wins.
func ledgerWritePool(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	if namesExecMode(cfg.ConnString()) || cfg.ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		return nil, nil
	}
	wcfg := cfg.Copy()
	if _, set := wcfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		wcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	wcfg.MaxConns, wcfg.MinConns = ledgerWritesConns, 0
	pool, err := pgxpool.NewWithConfig(ctx, wcfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database for ledger writes: %w", err)
	}
	return pool, nil
}

// direct reports whether a connection made with cfg reaches a Postgres server process
// itself: the probe is one connection, one simple-protocol query, closed at once.
func direct(cfg *pgx.ConnConfig) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	probe := cfg.Copy()
	probe.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	probe.Tracer = nil
	conn, err := pgx.ConnectConfig(ctx, probe)
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return false
	}
	return pid == conn.PgConn().PID()
}
