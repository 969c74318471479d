package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/localpg"
)

// clients is how many concurrent clients drive every lifecycle benchmark.
const clients = 4

var (
	clusterMu  sync.Mutex
	cluster    *localpg.Cluster
	clusterDir string
	created    = map[string]bool{}
)

// TestMain runs the benchmarks and then stops and removes the private cluster, if one was
// started: a plain `go test` without -bench starts nothing.
func TestMain(m *testing.M) {
	code := m.Run()
	clusterMu.Lock()
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: stop postgres:", err)
		}
		os.RemoveAll(clusterDir)
	}
	clusterMu.Unlock()
	os.Exit(code)
}

// startCluster starts the one private cluster of this run on first use. It is durable:
// fsync and synchronous commits stay on, since commits are what the lifecycle benchmarks
// measure.
func startCluster(b *testing.B) *localpg.Cluster {
	b.Helper()
	clusterMu.Lock()
	defer clusterMu.Unlock()
	if cluster != nil {
		return cluster
	}
	root := filepath.Join("..", ".settle")
	if err := os.MkdirAll(root, 0o755); err != nil {
		b.Fatalf("bench: %v", err)
	}
	dir, err := os.MkdirTemp(root, "bench-")
	if err != nil {
		b.Fatalf("bench: %v", err)
	}
	c, err := localpg.Start(context.Background(), localpg.Options{Dir: dir, Durable: true, Settings: extraSettings()})
	if err != nil {
		os.RemoveAll(dir)
		b.Fatalf("bench: start postgres: %v", err)
	}
	cluster, clusterDir = c, dir
	return c
}

// extraSettings reads SETTLE_BENCH_PG_SETTINGS, "name=value,name=value": server settings
// for diagnosis, such as shared_preload_libraries=pg_stat_statements. Figures quoted in
// docs/benchmarks.md are taken without any.
func extraSettings() map[string]string {
	out := map[string]string{}
	for kv := range strings.SplitSeq(os.Getenv("SETTLE_BENCH_PG_SETTINGS"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// database returns the URL of database name on the cluster, creating it on first use.
// Settle's schema is applied when migrate is set.
func database(b *testing.B, name string, migrate bool) string {
	b.Helper()
	c := startCluster(b)
	ctx := context.Background()
	url := c.URL(name)
	clusterMu.Lock()
	defer clusterMu.Unlock()
	if created[name] {
		return url
	}
	admin := adminConn(b)
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		b.Fatalf("bench: create database %s: %v", name, err)
	}
	if migrate {
		db, err := pg.Open(ctx, url)
		if err != nil {
			b.Fatalf("bench: %v", err)
		}
		err = db.Migrate(ctx)
		db.Close()
		if err != nil {
			b.Fatalf("bench: migrate %s: %v", name, err)
		}
	}
	created[name] = true
	return url
}

// adminConn connects to the cluster's postgres database, which no benchmark writes to, so
// reading statistics through it adds nothing to the counts of the measured databases.
func adminConn(b *testing.B) *pgx.Conn {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), cluster.URL("postgres"))
	if err != nil {
		b.Fatalf("bench: %v", err)
	}
	return conn
}

// counters are a database's figures at one moment.
type counters struct {
	commits int64         // pg_stat_database.xact_commit of the database
	wal     int64         // the cluster's WAL position in bytes
	goCPU   time.Duration // this process's user and system CPU
	pgCPU   time.Duration // the cluster's user and system CPU, its ended backends included
}

// counts returns database name's counters once every client session on it has ended. A
// session flushes its statistics before it leaves pg_stat_activity, so after a benchmark's
// pool is closed xact_commit includes all of its transactions. Only one benchmark runs at a
// time, so the cluster-wide WAL position is the benchmark's own, give or take autovacuum.
func counts(b *testing.B, name string) counters {
	b.Helper()
	ctx := context.Background()
	admin := adminConn(b)
	defer admin.Close(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`, name).Scan(&n)
		if err != nil {
			b.Fatalf("bench: %v", err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("bench: %d sessions still open on %s", n, name)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var c counters
	err := admin.QueryRow(ctx, `
SELECT xact_commit, pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint FROM pg_stat_database WHERE datname = $1`, name).Scan(&c.commits, &c.wal)
	if err != nil {
		b.Fatalf("bench: %v", err)
	}
	c.goCPU = processCPU()
	c.pgCPU = clusterCPU(b)
	return c
}

// processCPU returns the user and system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clusterCPU returns the CPU the cluster's processes have used: the postmaster's own and
// that of the children it has reaped (ended backends), from its /proc stat, plus that of
// its live children. CPU per lifecycle is a fairer figure than the rate when other work
// shares the machine. Linux only; elsewhere it is 0.
func clusterCPU(b *testing.B) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join(cluster.Dir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		return 0
	}
	stat := func(pid string) []string {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return nil
		}
		// The fields after the command, whose parentheses may hold spaces.
		s := string(b)
		return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	}
	// Field numbers of proc(5), less the two before the command's end: ppid 4, utime 14,
	// stime 15, cutime 16, cstime 17.
	ticks := func(f []string, from, to int) int64 {
		var n int64
		for i := from; i <= to && i-3 < len(f); i++ {
			v, _ := strconv.ParseInt(f[i-3], 10, 64)
			n += v
		}
		return n
	}
	total := ticks(stat(strconv.Itoa(pm)), 14, 17)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if f := stat(e.Name()); len(f) > 1 && f[1] == strconv.Itoa(pm) {
			total += ticks(f, 14, 15)
		}
	}
	// Linux reports these in clock ticks of 1/100 s (USER_HZ) on every common build.
	return time.Duration(total) * 10 * time.Millisecond
}

// runClients calls work for i in [0, n) from clients goroutines and returns the wall time
// from the first call to the last return. The first error stops every client.
func runClients(n int, work func(ctx context.Context, i int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := work(ctx, i); err != nil {
					cancel(fmt.Errorf("lifecycle %d: %w", i, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), context.Cause(ctx)
}

// measure runs b.N units of a variant's work from the clients on database db and reports
// them, after warming the variant up once. open starts the work (a pool, or DBOS) and
// returns the i-th unit and the function that stops it; it is called for the warm-up and
// again for the measurement, so that counts, which waits for every session on db to end,
// sees none of the warm-up's.
func measure(b *testing.B, variant, db, unit string, open func() (func(ctx context.Context, i int) error, func())) {
	b.Helper()
	if !warmed[variant] {
		work, done := open()
		warmUp(b, variant, work)
		done()
	}
	before := counts(b, db)
	work, done := open()

	b.ResetTimer()
	elapsed, err := runClients(b.N, work)
	b.StopTimer()
	done()
	if err != nil {
		b.Fatal(err)
	}
	report(b, variant, unit, elapsed, before, counts(b, db))
}

// warmUpFor is how long each variant runs, unmeasured, before its first measurement.
const warmUpFor = 5 * time.Second

var warmed = map[string]bool{}

// warmUp runs work from the clients for warmUpFor, once per variant and process, before the
// variant's first measurement. On a new database the first seconds of a variant ran a fifth
// slower than the same variant run again a minute later (Settle's lifecycle at about 1,230
// against 1,500 a second), whichever variant ran first on the cluster; a variant measured
// first would otherwise carry that start-up cost and the others not.
func warmUp(b *testing.B, variant string, work func(ctx context.Context, i int) error) {
	b.Helper()
	warmed[variant] = true
	ctx, cancel := context.WithTimeout(context.Background(), warmUpFor)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				// Each lifecycle runs to its end: the deadline only stops the next one.
				if err := work(context.Background(), int(next.Add(1)-1)); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("bench: warm up %s: %v", variant, err)
	}
}

var runSeq atomic.Int64

// runID returns a prefix that makes keys unique across the benchmark's repeated runs.
func runID() string {
	return fmt.Sprintf("r%d-%d", time.Now().UnixNano(), runSeq.Add(1))
}
