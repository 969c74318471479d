package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/localpg"
)

// tenantName is the name of tenant i of the run; its payments are labelled with it.
func tenantName(i int) string { return fmt.Sprintf("loadshop%d", i+1) }

// world is everything a run starts: the cluster, the fakes and the replicas.
type world struct {
	cfg     config
	runDir  string
	cluster *localpg.Cluster
	url     string
	db      *pg.DB
	stripe  *fake.Stripe
	llm     *fake.LLM
	llmBase string   // the fake LLM's base URL, http://host:port/v1
	env     []string // the replicas' environment beside the inherited one
	tokens  []string // the API token of each tenant
	// anthropic is the fake Anthropic, which only the gateway benchmark starts.
	anthropic *fake.Anthropic
	// pgSettings are server settings of the cluster beside localpg's own.
	pgSettings map[string]string
	// walStart is where the WAL was at the counted phase's start (-statements).
	walStart string

	mu sync.Mutex
	// slots are the two addresses the client balances over; the process behind one changes
	// when it is killed and started again.
	slots [2]*replica
	// all are every replica process ever started, for the RSS report.
	all []*replica
}

// startWorld starts the run's parts. On an error, what was started is stopped again.
func startWorld(ctx context.Context, cfg config, out io.Writer) (w *world, err error) {
	if w, err = newWorld(cfg, "load-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	fmt.Fprintf(out, "load run in %s: starting a durable Postgres, the fakes and two replicas\n", w.runDir)
	if err := w.startDatabase(ctx); err != nil {
		return nil, err
	}
	w.startFakes()
	if err := w.prepare(ctx, replicaEnv); err != nil {
		return nil, err
	}
	for i := range w.slots {
		r, err := w.startReplica(ctx, fmt.Sprintf("replica%d", i+1), freeAddr())
		if err != nil {
			return nil, err
		}
		w.slots[i] = r
	}
	go w.sampleRSS(ctx)
	return w, nil
}

// newWorld checks the settle binary and makes the run's folder, named prefix and a random
// tail, under cfg.dir; nothing is started yet.
func newWorld(cfg config, prefix string) (*world, error) {
	if _, err := os.Stat(cfg.settleBin); err != nil {
		return nil, fmt.Errorf("the settle binary: %w (make build makes bin/settle)", err)
	}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return nil, err
	}
	runDir, err := os.MkdirTemp(cfg.dir, prefix)
	if err != nil {
		return nil, err
	}
	// As root the server runs as postgres, which must reach its folder.
	_ = os.Chmod(runDir, 0o755)
	return &world{cfg: cfg, runDir: runDir}, nil
}

// startDatabase starts the private cluster, durable as in production (fsync and
// synchronous commits on), and creates the run's database.
func (w *world) startDatabase(ctx context.Context) error {
	c, err := localpg.Start(ctx, localpg.Options{Dir: filepath.Join(w.runDir, "pg"), Durable: true, Settings: w.pgSettings})
	if err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	w.cluster = c
	admin, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE settle"); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	w.url = c.URL("settle")
	return nil
}

// startFakes starts the fake Stripe and the fake LLM on loopback ports with the run's
// fault mix, and sets the replicas' environment to point at them.
func (w *world) startFakes() {
	w.stripe = fake.NewStripe(fake.StripeOptions{Seed: int64(w.cfg.seed)})
	w.llm = fake.NewLLM(fake.LLMOptions{Seed: int64(w.cfg.seed), Latency: llmLatency, ChunkDelay: llmChunkDelay})
	if !w.cfg.faults {
		return
	}
	for _, f := range stripeFaults {
		w.stripe.AddFault(f)
	}
	for _, f := range llmFaults {
		w.llm.AddFault(f)
	}
}

// prepare migrates the database, creates the tenants' API tokens with the settle binary, as
// an operator would, and fixes the replicas' environment: base, then the addresses of the
// database and the fakes.
func (w *world) prepare(ctx context.Context, base []string) error {
	stripeBase, err := w.stripe.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	llmBase, err := w.llm.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	w.llmBase = llmBase
	w.env = append(slices.Clip(base), "DATABASE_URL="+w.url, "STRIPE_API_BASE="+stripeBase, "SETTLE_LLM_BASE_URL="+llmBase)
	if _, err := w.runSettle(ctx, "migrate"); err != nil {
		return err
	}
	for i := range w.cfg.tenants {
		out, err := w.runSettle(ctx, "token", "add", "--tenant", tenantName(i), "--name", "load")
		if err != nil {
			return err
		}
		words := strings.Fields(strings.TrimSpace(out))
		if len(words) == 0 || !strings.HasPrefix(words[len(words)-1], "stl_") {
			return fmt.Errorf("settle token add printed no token: %q", out)
		}
		w.tokens = append(w.tokens, words[len(words)-1])
	}
	w.db, err = pg.Open(ctx, w.url)
	return err
}

// runSettle runs the settle binary once with the replicas' environment.
func (w *world) runSettle(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, w.cfg.settleBin, args...)
	cmd.Env = append(os.Environ(), w.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("settle %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// replicaEnv configures the replicas as production would be, with the leases and the
// reconciler's interval shortened so that a killed replica's work is taken over, and the
// Stripe and LLM timeouts shortened to below the fakes' timeout faults, within the run.
var replicaEnv = []string{
	"STRIPE_API_KEY=sk_test_load", "SETTLE_LLM_API_KEY=sk-load",
	"SETTLE_OPERATION_LEASE=5s", "SETTLE_ROLE_LEASE=3s", "SETTLE_JOB_LEASE=10s",
	"SETTLE_RECONCILE_INTERVAL=5s", "SETTLE_STRIPE_TIMEOUT=2s", "SETTLE_REFUND_DEADLINE=10s",
	"SETTLE_LLM_ATTEMPT_TIMEOUT=3s", "SETTLE_LLM_DEADLINE=20s", "SETTLE_SHUTDOWN_TIMEOUT=20s",
	"SETTLE_LOG_LEVEL=info",
}

// close stops every replica, the fakes and the cluster, and removes the cluster's data; the
// replicas' logs stay in the run's folder.
func (w *world) close() {
	w.mu.Lock()
	all := append([]*replica(nil), w.all...)
	w.mu.Unlock()
	for _, r := range all {
		r.stop()
	}
	if w.db != nil {
		w.db.Close()
	}
	if w.stripe != nil {
		_ = w.stripe.Close()
	}
	if w.llm != nil {
		_ = w.llm.Close()
	}
	if w.anthropic != nil {
		_ = w.anthropic.Close()
	}
	if w.cluster != nil {
		if err := w.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "settle-load: stop postgres:", err)
		}
		os.RemoveAll(w.cluster.Dir)
	}
}

// slot returns the replica now behind slot i.
func (w *world) slot(i int) *replica {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.slots[i]
}

// killAndRestart kills the replica of slot i with SIGKILL and, after restartAfter (unless
// 0), starts a new process on the same address under a new worker id, as a supervisor
// restarting it would; the new pid makes the default worker id new too.
func (w *world) killAndRestart(ctx context.Context, i int, restartAfter time.Duration, log func(string, ...any)) {
	old := w.slot(i)
	old.sample()
	old.kill()
	log("killed %s (pid %d) with SIGKILL", old.name, old.cmd.Process.Pid)
	if restartAfter <= 0 {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(restartAfter):
	}
	r, err := w.startReplica(ctx, old.name+"b", old.addr)
	if err != nil {
		log("restart %s: %v", old.name, err)
		return
	}
	w.mu.Lock()
	w.slots[i] = r
	w.mu.Unlock()
	log("started %s on %s", r.name, r.addr)
}

// sampleRSS reads every replica's peak RSS twice a second until ctx ends, so a replica's
// peak is known also after it was killed.
func (w *world) sampleRSS(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		all := append([]*replica(nil), w.all...)
		w.mu.Unlock()
		for _, r := range all {
			r.sample()
		}
	}
}

// waitSettled waits, up to within, until no operation is in progress under a lease or a key
// retention that ran out (the reaper's work) and no job is queued or running, and returns
// how long it took.
func (w *world) waitSettled(ctx context.Context, within time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < within && ctx.Err() == nil {
		var stalled, jobs int
		err := w.db.Pool.QueryRow(ctx, `SELECT
	(SELECT count(*) FROM operations WHERE status = 'in_progress' AND coalesce(lease_until, retry_until, '-infinity') < now()),
	(SELECT count(*) FROM jobs WHERE status IN ('queued', 'running'))`).Scan(&stalled, &jobs)
		if err == nil && stalled == 0 && jobs == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return time.Since(start)
}
