package pg

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// group commits concurrent single-statement writes together, as River batches its fetches
// and completions: while one batch is at the server, the next gathers. A batch is one
// round trip and one implicit transaction, so N concurrent lifecycles pay for about N/k
// commits instead of N. Statements in one batch are independent compare-and-sets; a
// statement that fails aborts its batch, which is then run again one statement at a time
// so that no caller sees another's error.
//
// A writer that finds no batch at the server sends its statement at once. One that finds a
// batch there starts a second only when another statement waits with it (secondBatch):
// alone, it waits for the batch at the server, a few hundred microseconds, and goes out in
// the next, which anything arriving meanwhile joins. A second batch of one statement would
// pay a commit, a disk flush of the WAL and a round trip of its own; at a steady, moderate
// rate (an LLM gateway's open-loop traffic) that was most statements, the server flushing
// the WAL about 1.8 times per call of two statements, where waiting brings it to 1.5–1.7
// and takes 0.15 ms of Settle's own CPU off each call. When two or more wait, the second
// batch goes at once, so closed-loop clients that keep both batches full lose no throughput
// (docs/benchmarks/journal.md). A lone statement waits for the batch at the server no
// longer than loneWait: a batch held there, by a lock another transaction keeps, say, must
// not hold every write that comes alone behind it.
type group struct {
	pool *pgxpool.Pool
	// flushers caps the batches in flight at once; more would only make batches smaller.
	flushers int

	// loneWait is how long a lone statement waits for the batch at the server before it
	// leads a second batch of its own.
	loneWait time.Duration

	mu     sync.Mutex
	queue  []*groupJob
	active int

	// rerun counts the batches that were rolled back and run again one statement at a time.
	rerun atomic.Int64
}

type groupJob struct {
	// queued is when the job joined the queue, on the monotonic clock: backlog measures
	// real waiting, not the domain's (possibly manual) clock.
	queued time.Time
	sql    string
	args   []any
	// key names what the statement locks first: a batch sends its statements in the order
	// of their keys (exec).
	key  string
	scan func(pgx.Row) error
	err  error
	done chan struct{}
}

// maxBatch bounds one batch so that a burst does not make one caller wait for hundreds.
const maxBatch = 32

// secondBatch is how many statements must wait, the newcomer's included, before a batch
// goes out beside one already at the server.
const secondBatch = 2

// defaultLoneWait is group.loneWait: many times a batch's usual time at the server (under a
// millisecond, a few on a busy machine), far below the write backlog at which a replica
// sheds requests (250 ms by default).
const defaultLoneWait = 10 * time.Millisecond

func newGroup(pool *pgxpool.Pool) *group {
	return &group{pool: pool, flushers: 2, loneWait: defaultLoneWait}
}

// queryRow runs sql with args in the next batch and scans its one row with scan. key names
// what sql locks first (lockKey).
func (g *group) queryRow(sql string, named pgx.NamedArgs, key string, scan func(pgx.Row) error) error {
	sql, args, err := positional(sql, named)
	if err != nil {
		return err
	}
	if g.flushers <= 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return scan(again{g.pool}.QueryRow(ctx, sql, args...))
	}
	j := &groupJob{queued: time.Now(), sql: sql, args: args, key: key, scan: scan, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, j)
	if g.active == 0 || (g.active < g.flushers && len(g.queue) >= secondBatch) {
		// Lead: send the batch from this goroutine, so a lone writer pays no hand-off.
		g.active++
		g.mu.Unlock()
		g.lead(j)
		return j.err
	}
	// Alone behind a batch, with a slot free: only then can the wait be long, since every
	// busy slot drains the queue before it frees itself.
	lone := g.active < g.flushers
	g.mu.Unlock()
	// The caller waits even if its context ends: the write may already be at the server,
	// and its outcome must be known, not guessed.
	if lone && g.waitLone(j) {
		g.lead(j)
	}
	<-j.done
	return j.err
}

// waitLone waits for lone statement j's batch to be done, or for loneWait if j is still
// queued then with a slot free, and reports whether the caller is to lead j's batch,
// holding that slot.
func (g *group) waitLone(j *groupJob) bool {
	t := time.NewTimer(g.loneWait)
	defer t.Stop()
	select {
	case <-j.done:
		return false
	case <-t.C:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active < g.flushers && slices.Contains(g.queue, j) {
		g.active++
		return true
	}
	return false
}

// backlog is how long the oldest statement still waiting for a batch has waited, 0 when
// none waits. The queue is first in, first out, so its head is the oldest: one lock and
// one clock read, cheap enough for every API request to ask. Statements already sent in a
// batch do not count; they wait on the server, and the queue behind them grows instead.
func (g *group) backlog() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		return 0
	}
	return time.Since(g.queue[0].queued)
}

// lead sends batches until mine is done, then leaves what queued meanwhile to a
// background flusher, which takes over this leader's slot.
func (g *group) lead(mine *groupJob) {
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			// Mine went out in the other leader's batch, which takes every statement queued.
			// Wait for it as a follower does and give the slot to the next writer: looping
			// here would send empty batches, a core's worth of CPU until that batch is back.
			g.active--
			g.mu.Unlock()
			<-mine.done
			return
		}
		n := min(len(g.queue), maxBatch)
		jobs := g.queue[:n:n]
		g.queue = append([]*groupJob(nil), g.queue[n:]...)
		g.mu.Unlock()
		g.exec(jobs)
		select {
		case <-mine.done:
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(g.queue) > 0 {
				go g.flush()
				return
			}
			g.active--
			return
		default:
		}
	}
}

func (g *group) flush() {
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.active--
			g.mu.Unlock()
			return
		}
		n := min(len(g.queue), maxBatch)
		jobs := g.queue[:n:n]
		g.queue = append([]*groupJob(nil), g.queue[n:]...)
		g.mu.Unlock()
		g.exec(jobs)
	}
}

func (g *group) exec(jobs []*groupJob) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() {
		for _, j := range jobs {
			close(j.done)
		}
	}()
	if len(jobs) > 1 {
		// Each statement holds what it locks until the batch commits. Two batches that took
		// the same rows in opposite orders (repeats of two intents arriving together) would
		// wait on each other until Postgres rolled one back, a second later; in one order,
		// the later batch waits for the earlier one instead.
		slices.SortStableFunc(jobs, func(a, b *groupJob) int { return strings.Compare(a.key, b.key) })
		b := &pgx.Batch{}
		for _, j := range jobs {
			b.Queue(j.sql, j.args...).QueryRow(func(r pgx.Row) error {
				j.err = j.scan(r)
				return nil
			})
		}
		err := g.pool.SendBatch(ctx, b).Close()
		failed := err != nil
		for _, j := range jobs {
			var pgErr *pgconn.PgError
			failed = failed || (j.err != nil && !errors.Is(j.err, pgx.ErrNoRows)) || errors.As(j.err, &pgErr)
		}
		if !failed {
			return
		}
		g.rerun.Add(1)
	}
	// One at a time: the lone job, or every job of a batch that rolled back, a deadlock's
	// victim among them. Each is a transaction of its own, sent again if it is one (again).
	for _, j := range jobs {
		j.err = j.scan(again{g.pool}.QueryRow(ctx, j.sql, j.args...))
	}
}

// lockKey is the key of a batched statement (groupJob.key): an opening locks its intent's
// entries first, a change its operation's row, and the openings go first.
func lockKey(opening bool, parts ...string) string {
	if opening {
		return "0 " + strings.Join(parts, "\x00")
	}
	return "1 " + strings.Join(parts, "\x00")
}
