package pg_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/pg/purgestore"
	"github.com/settle-dev/settle/ops/pg/retainstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/retain"
)

// wantUnreachable checks err is the store's error for a database it could not reach.
func wantUnreachable(t *testing.T, what string, err error) {
	t.Helper()
	if ops.ErrorCode(err) != ops.EUNAVAILABLE || ops.ErrorReason(err) != ops.ReasonDatabaseUnavailable || !ops.Unreachable(err) {
		t.Errorf("%s with the database down: %v (code %s); want %s", what, err, ops.ErrorCode(err), ops.ReasonDatabaseUnavailable)
	}
}

// With the database stopped, the statements of every flow (a token, an admission, a
// ledger read, a claim of the background loops) fail as unreachable, never as internal
// errors, whether they meet a connection the outage cut or find no server to connect to.
func TestStatementsOfAStoppedDatabaseAreUnreachable(t *testing.T) {
	t.Parallel()
	db, relay := pgtest.OpenBehindRelay(t)
	ctx := context.Background()
	tn, err := db.EnsureTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	token, err := db.CreateToken(ctx, tn.ID, "t")
	if err != nil {
		t.Fatal(err)
	}
	ledger := ops.NewLedger(db, ops.SystemClock{})
	ledger.Register(refund.Kind())
	in := ops.Intent{TenantID: tn.ID, Kind: ops.KindRefund, Provider: "stripe", IntentKey: "o1|100|usd", Fingerprint: "fp",
		AmountCents: 100, Currency: "usd", Retention: 24 * time.Hour, Owner: "w1"}
	adm, err := ledger.Admit(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	relay.Off()
	// Twice: first on the pool's connections the outage cut, then on new ones it refuses.
	for range 2 {
		_, err = db.TenantByToken(ctx, token)
		wantUnreachable(t, "token", err)
		in.IntentKey = "o2|100|usd"
		_, err = ledger.Admit(ctx, in)
		wantUnreachable(t, "admission", err)
		_, err = ledger.Get(ctx, adm.Op.ID)
		wantUnreachable(t, "get", err)
		_, err = db.ClaimStalled(ctx, "reaper", time.Now(), time.Now().Add(time.Minute), 10)
		wantUnreachable(t, "claim stalled", err)
		_, err = db.ClaimEvents(ctx, time.Now(), time.Now().Add(time.Minute), 10)
		wantUnreachable(t, "claim events", err)
		_, err = accountstore.New(db).UserByID(ctx, 1)
		wantUnreachable(t, "user", err)
	}
}

// A session the server ends (an administrator's shutdown, SQLSTATE 57P01) is an outage too.
func TestSessionEndedByTheServerIsUnreachable(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(pgtest.NewDatabase(t))
	db, err := pg.Open(context.Background(), url+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var pid int
	if err := db.Pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1, 5000)`, pid); err != nil {
		t.Fatal(err)
	}
	_, err = db.TenantByToken(ctx, pg.TokenPrefix+strings.Repeat("a", 64))
	wantUnreachable(t, "token on a terminated session", err)
}

// logLines keeps the messages a logger was given.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	loop := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "loop" {
			loop = a.Value.String() + ": "
		}
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, loop+r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.HasSuffix(s, msg) {
			n++
		}
	}
	return n
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// waitFor waits up to ten seconds until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, outbox.Event) error { return nil }

// The background loops (reaper, outbox relay, rollups, body purge, retention, alert
// evaluator, bulk lookups, job worker), each run by ops.Loop, the singletons under their
// roles, pass every few milliseconds; through two outages of the database each logs one
// line when an outage starts and one when it ends, and nothing for the passes that failed in
// between.
func TestBackgroundLoopsLogOneLinePerOutage(t *testing.T) {
	t.Parallel()
	db, relay := pgtest.OpenBehindRelay(t)
	var clock ops.Clock = ops.SystemClock{}
	const every = 5 * time.Millisecond
	ledger := ops.NewLedger(db, clock)
	role := func(log *slog.Logger, name string) *ops.Role {
		return ops.NewRole(db, clock, log, name, name+":test", 3*time.Second)
	}
	starts := map[string]func(ctx context.Context, log *slog.Logger){
		"reaper": func(ctx context.Context, log *slog.Logger) {
			(&ops.Reaper{Ledger: ledger, Owner: "reaper", Interval: every, Logger: log}).Loop().Run(ctx)
		},
		"outbox relay": func(ctx context.Context, log *slog.Logger) {
			(&outbox.Relay{Store: db, Publisher: nopPublisher{}, Clock: clock, Interval: every, Logger: log}).Loop("outbox relay").Run(ctx)
		},
		"rollups": func(ctx context.Context, log *slog.Logger) {
			(&recon.Rollups{Store: rollupstore.New(db), Clock: clock, Interval: every, Role: role(log, recon.RollupRole), Logger: log}).Loop().Run(ctx)
		},
		"body purge": func(ctx context.Context, log *slog.Logger) {
			(&llm.Purger{Store: purgestore.New(db), Clock: clock, Interval: every, Role: role(log, llm.PurgeRole), Logger: log}).Loop().Run(ctx)
		},
		"retention": func(ctx context.Context, log *slog.Logger) {
			(&retain.Retention{Store: retainstore.New(db), Clock: clock, Keep: 24 * time.Hour, Interval: every, Actor: "retention", Role: role(log, retain.Role),
				Logger: log}).Loop().Run(ctx)
		},
		"alert evaluator": func(ctx context.Context, log *slog.Logger) {
			as := alertstore.New(db)
			ev := &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: as, Store: as, Clock: clock, Logger: log, Tick: every}
			kept := role(log, "alerts").Kept()
			ops.NewLoop(log, "alert evaluator", ev.Interval(), func(ctx context.Context, _ *slog.Logger) (bool, error) {
				_, _, err := kept.Hold(ctx, func(ctx context.Context, _ ops.Lease) error {
					_, err := ev.RunOnce(ctx)
					return err
				})
				return false, err
			}).Run(ctx)
		},
		"bulk lookups": func(ctx context.Context, log *slog.Logger) {
			(&desk.BulkRunner{Desk: &desk.Desk{Ledger: ledger, Bulk: deskstore.New(db)}, Queues: deskstore.New(db), Owner: "bulk", Interval: every, Logger: log}).Loop().Run(ctx)
		},
		"job worker": func(ctx context.Context, log *slog.Logger) {
			(&jobs.Worker{Store: jobstore.New(db), Events: db, Ledger: jobs.NewLedger(db, clock, time.Minute, false), Owner: "jobs", Poll: every, Logger: log}).Loop().Run(ctx)
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	logs := map[string]*logLines{}
	for name, start := range starts {
		l := &logLines{}
		logs[name] = l
		wg.Add(1)
		go func() {
			defer wg.Done()
			start(ctx, slog.New(l))
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	time.Sleep(100 * time.Millisecond)
	for outage := 1; outage <= 2; outage++ {
		relay.Off()
		for name, l := range logs {
			waitFor(t, fmt.Sprintf("%s to see outage %d", name, outage), func() bool { return l.count("database unreachable, retrying") == outage })
		}
		time.Sleep(100 * time.Millisecond) // many failed passes
		relay.On()
		for name, l := range logs {
			waitFor(t, fmt.Sprintf("%s to see the end of outage %d", name, outage), func() bool { return l.count("database reachable again") == outage })
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	for name, l := range logs {
		lines := l.all()
		failed := 0
		for _, s := range lines {
			if strings.Contains(s, "fail") {
				failed++
			}
		}
		if failed > 0 || l.count("database unreachable, retrying") != 2 || l.count("database reachable again") != 2 {
			t.Errorf("%s logged, through two outages:\n%s\nwant one line as each outage starts and one as it ends", name, strings.Join(lines, "\n"))
		}
	}
}
