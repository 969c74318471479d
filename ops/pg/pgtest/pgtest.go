// Package pgtest gives each test its own migrated database on one private cluster per test
// binary, so tests on real Postgres run in parallel without seeing each other.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/localpg"
)

const template = "settle_template"

var (
	mu      sync.Mutex
	cluster *localpg.Cluster
	baseURL string // connection string with the database name to replace
	ready   bool
	seq     atomic.Int64
)

// Main runs the package's tests, then what AtExit was given, and stops the cluster. Call it
// from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	for _, f := range atExit {
		f()
	}
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
		os.RemoveAll(cluster.Dir)
	}
	mu.Unlock()
	os.Exit(code)
}

// atExit are what Main runs after the tests, before it stops the server.
var atExit []func()

// AtExit has Main run f after every test of the binary has run: for what the binary's tests
// share, such as a program built once for all of them.
func AtExit(f func()) {
	mu.Lock()
	defer mu.Unlock()
	atExit = append(atExit, f)
}

// URL returns the connection string of a database on the test server.
func URL(db string) string {
	if strings.Contains(baseURL, "{db}") {
		return strings.ReplaceAll(baseURL, "{db}", db)
	}
	return baseURL
}

// serverURL is the pattern of the test databases' URLs on the server u names: u with its
// database, the path after the host, replaced by {db}. The URL may hold a password, so its
// refusal never repeats it, nor pgx's error, which quotes it.
func serverURL(u string) (string, error) {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return "", errors.New("SETTLE_TEST_DATABASE_URL is malformed; expected postgres://user@host:port/db")
	}
	if _, rest, ok := strings.Cut(u, "://"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 && strings.HasPrefix(rest[i+1:], cfg.Database) {
			at := len(u) - len(rest) + i + 1
			return u[:at] + "{db}" + u[at+len(cfg.Database):], nil
		}
	}
	return strings.Replace(u, "/"+cfg.Database, "/{db}", 1), nil
}

func setup(ctx context.Context) error {
	mu.Lock()
	defer mu.Unlock()
	if ready {
		return nil
	}
	if u := os.Getenv("SETTLE_TEST_DATABASE_URL"); u != "" {
		var err error
		if baseURL, err = serverURL(u); err != nil {
			return err
		}
	} else {
		dir, err := os.MkdirTemp(filepath.Join(ProjectDir(), ".settle"), "test-")
		if err != nil {
			if err := os.MkdirAll(filepath.Join(ProjectDir(), ".settle"), 0o755); err != nil {
				return err
			}
			if dir, err = os.MkdirTemp(filepath.Join(ProjectDir(), ".settle"), "test-"); err != nil {
				return err
			}
		}
		c, err := localpg.Start(ctx, localpg.Options{Dir: dir})
		if err != nil {
			return err
		}
		cluster = c
		baseURL = strings.Replace(c.URL("postgres"), "/postgres?", "/{db}?", 1)
	}
	admin, err := pgx.Connect(ctx, URL("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+template)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+template); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	db, err := pg.Open(ctx, URL(template))
	if err != nil {
		return err
	}
	err = db.Migrate(ctx)
	db.Close()
	if err != nil {
		return err
	}
	ready = true
	return nil
}

// New returns a fresh, migrated database for t, dropped when t ends.
func New(t testing.TB) *pg.DB {
	t.Helper()
	db, _ := NewWithURL(t)
	return db
}

// NewWithURL is New with the URL of its database, for a test that also hands the database to
// a process or a command of its own.
func NewWithURL(t testing.TB) (*pg.DB, string) {
	t.Helper()
	name := NewDatabase(t)
	// As settle serve opens it on a direct connection: prepared statements, and the
	// ledger's writes on a pool of their own.
	db, err := pg.Open(context.Background(), URL(name), pg.PreparedWhenDirect())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(db.Close)
	return db, URL(name)
}

// NewDatabase creates a fresh migrated database for t and returns its name; it is dropped
// when t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	if err := setup(ctx); err != nil {
		t.Fatalf("pgtest: start Postgres: %v", err)
	}
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), seq.Add(1))
	admin, err := pgx.Connect(ctx, URL("postgres"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s STRATEGY FILE_COPY", name, template)); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		a, err := pgx.Connect(ctx, URL("postgres"))
		if err != nil {
			return
		}
		defer a.Close(ctx)
		_, _ = a.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return name
}

// ProjectDir returns the repository root (the folder holding go.mod).
func ProjectDir() string {
	dir, _ := os.Getwd()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return dir
}
