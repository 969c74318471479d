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
		dir, err := projectTemp("test-")
		if err != nil {
			return err
		}
		if testing.Short() {
			if err := copyCachedCluster(ctx, dir); err != nil {
				// Then the cluster is made from nothing, as without -short.
				fmt.Fprintln(os.Stderr, "pgtest: no cached cluster:", err)
				_ = os.RemoveAll(dir)
				if err := os.Mkdir(dir, 0o700); err != nil {
					return err
				}
			}
		}
		c, err := localpg.Start(ctx, localpg.Options{Dir: dir})
		if err != nil {
			return err
		}
		cluster = c
		baseURL = strings.Replace(c.URL("postgres"), "/postgres?", "/{db}?", 1)
	}
	if templateCurrent(ctx) {
		ready = true
		return nil
	}
	if err := makeTemplate(ctx, URL); err != nil {
		return err
	}
	ready = true
	return nil
}

// projectTemp makes a new folder under the project's .settle folder, named prefix and a
// random suffix.
func projectTemp(prefix string) (string, error) {
	root := filepath.Join(ProjectDir(), ".settle")
	dir, err := os.MkdirTemp(root, prefix)
	if err != nil {
		if err := os.MkdirAll(root, 0o755); err != nil {
			return "", err
		}
		return os.MkdirTemp(root, prefix)
	}
	return dir, nil
}

// makeTemplate creates the template database on the server whose databases url names,
// migrated to the newest schema, replacing any left from before.
func makeTemplate(ctx context.Context, url func(db string) string) error {
	admin, err := pgx.Connect(ctx, url("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+template)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+template); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	db, err := pg.Open(ctx, url(template))
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Migrate(ctx)
}

// templateCurrent says whether the test server already holds the template database at the
// newest schema, as a cluster copied from the cache does. On a server named by
// SETTLE_TEST_DATABASE_URL the template is always made again: another checkout of other
// migrations may have left it.
func templateCurrent(ctx context.Context) bool {
	if cluster == nil {
		return false
	}
	admin, err := pgx.Connect(ctx, URL("postgres"))
	if err != nil {
		return false
	}
	var exists bool
	err = admin.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", template).Scan(&exists)
	admin.Close(ctx)
	if err != nil || !exists {
		return false
	}
	db, err := pg.Open(ctx, URL(template))
	if err != nil {
		return false
	}
	defer db.Close()
	return db.CheckSchema(ctx) == nil
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
