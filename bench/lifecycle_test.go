package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
)

// The databases of the lifecycle benchmarks: one each, so commits can be counted apart.
const (
	settleDB = "bench_settle"
	naiveDB  = "bench_naive"
	riverDB  = "bench_river"
)

// riverSetup is one configuration of the River reference. Four inserters match Settle's
// four clients in both.
type riverSetup struct {
	maxWorkers    int
	fetchCooldown time.Duration // 0: River's default, 100 ms
	fetchPoll     time.Duration // 0: River's default, 1 s
}

var (
	// riverDefault is River as its documentation starts it: 100 workers, default fetch
	// timing. The 100 ms fetch cooldown caps it near 1,000 jobs/s.
	riverDefault = riverSetup{maxWorkers: 100}
	// riverTuned is the fastest setting of a small sweep on this machine (workers 4, 20
	// and 100; cooldown 1, 10 and 100 ms): the reference to beat without excuses.
	riverTuned = riverSetup{maxWorkers: 100, fetchCooldown: 10 * time.Millisecond, fetchPoll: 100 * time.Millisecond}
)

// riverPoolConns leaves River room for its inserters, producer, completer and listener.
const riverPoolConns = 16

// lifecycleResult is one variant's last measurement, kept for the summary.
type lifecycleResult struct {
	perSecond float64
	commits   float64
	wal       float64
	goCPU     float64 // µs of this process's CPU per lifecycle
	pgCPU     float64 // µs of the cluster's CPU per lifecycle
	n         int
}

var lifecycleResults = map[string]lifecycleResult{}

// BenchmarkLifecycle measures whole operation lifecycles with 4 concurrent clients on a
// durable cluster, four ways side by side, and ends with their ratios:
//
//   - settle: ops.Ledger on ops/pg. Admit commits the operation, the client request, the
//     first attempt (the claim) and the audit row in one statement; Run sends through a
//     no-op provider and commits the close with the attempt's end, evidence, audit and
//     outbox rows in one statement.
//   - naive: the same rows on the same schema in three plain pgx transactions, one round
//     trip per statement.
//   - dbos: DBOS Transact v1.9.0, the peer that does the same job: one workflow per
//     intent, its id the intent's key, with one step that sends through the same no-op
//     provider; each client waits for the workflow's result (benchDBOS).
//   - paired: settle and dbos again, both open at once, in alternating turns
//     (benchPaired): their ratio with the host's drift spread over both.
//   - river: River v0.51.2 inserting and working a no-op job, end to end, kept for
//     reference: a queue, not a record of the intent.
//
// b.N is the number of lifecycles (or workflows, or jobs); commits/op is the database's
// pg_stat_database.xact_commit delta over the run divided by b.N.
func BenchmarkLifecycle(b *testing.B) {
	b.Run("settle", func(b *testing.B) { benchSettle(b, "settle", 2, "") })
	b.Run("settle_custom_plans", func(b *testing.B) { benchSettle(b, "settle_custom_plans", 2, "&plan_cache_mode=auto") })
	b.Run("settle_nogroup", func(b *testing.B) { benchSettle(b, "settle_nogroup", 0, "") })
	b.Run("naive", benchNaive)
	b.Run("dbos", benchDBOS)
	b.Run("paired", benchPaired)
	b.Run("river", func(b *testing.B) { benchRiver(b, "river", riverDefault) })
	b.Run("river_tuned", func(b *testing.B) { benchRiver(b, "river_tuned", riverTuned) })
	b.Run("summary", func(b *testing.B) {
		s := lifecycleResults["settle"]
		if s.perSecond == 0 {
			b.Skip("run settle first")
		}
		for range b.N {
		}
		b.ReportMetric(0, "ns/op")
		// Settle ÷ each peer that ran: above 1, Settle completes more per second.
		for _, v := range []string{"naive", "dbos", "river", "river_tuned", "settle_custom_plans"} {
			if x := lifecycleResults[v]; x.perSecond > 0 {
				b.ReportMetric(s.perSecond/x.perSecond, "settle_vs_"+strings.TrimPrefix(v, "settle_")+"_x")
			}
		}
		// The same by CPU per lifecycle (Go and Postgres): the peer's ÷ Settle's, which other
		// work on the machine disturbs less than the rates.
		if x := lifecycleResults["dbos"]; x.perSecond > 0 && s.goCPU+s.pgCPU > 0 {
			b.ReportMetric((x.goCPU+x.pgCPU)/(s.goCPU+s.pgCPU), "cpu_dbos_vs_settle_x")
		}
		if pairedRatio > 0 {
			b.ReportMetric(pairedRatio, "settle_vs_dbos_paired_x")
		}
	})
	printSummary()
	printPaired()
}

var variants = []string{"settle", "settle_custom_plans", "settle_nogroup", "naive", "dbos", "river", "river_tuned"}

// printSummary prints the variants that ran, once Settle has.
func printSummary() {
	if lifecycleResults["settle"].perSecond == 0 {
		return
	}
	fmt.Printf("\nlifecycles with %d concurrent clients, durable commits:\n", clients)
	fmt.Printf("  %-15s %10s %11s %11s %10s %10s %8s %8s %9s\n", "variant", "per second", "commits/op", "WAL B/op",
		"Go µs/op", "PG µs/op", "n", "settle/x", "cpu x/settle")
	st := lifecycleResults["settle"]
	for _, v := range variants {
		x := lifecycleResults[v]
		if x.perSecond == 0 {
			continue
		}
		fmt.Printf("  %-15s %10.0f %11.2f %11.0f %10.0f %10.0f %8d %7.2fx %8.2fx\n", v, x.perSecond, x.commits, x.wal,
			x.goCPU, x.pgCPU, x.n, st.perSecond/x.perSecond, (x.goCPU+x.pgCPU)/(st.goCPU+st.pgCPU))
	}
	fmt.Println()
}

// report records a run's figures on b and for the summary.
func report(b *testing.B, variant, unit string, elapsed time.Duration, before, after counters) {
	rate := float64(b.N) / elapsed.Seconds()
	perOp := float64(after.commits-before.commits) / float64(b.N)
	wal := float64(after.wal-before.wal) / float64(b.N)
	goCPU := float64((after.goCPU - before.goCPU).Microseconds()) / float64(b.N)
	pgCPU := float64((after.pgCPU - before.pgCPU).Microseconds()) / float64(b.N)
	b.ReportMetric(rate, unit)
	b.ReportMetric(perOp, "commits/op")
	b.ReportMetric(wal, "WAL_B/op")
	b.ReportMetric(goCPU, "go_cpu_us/op")
	b.ReportMetric(pgCPU, "pg_cpu_us/op")
	lifecycleResults[variant] = lifecycleResult{perSecond: rate, commits: perOp, wal: wal, goCPU: goCPU, pgCPU: pgCPU, n: b.N}
}

// tenant returns the id of the benchmark tenant, creating it if needed.
func tenant(b *testing.B, pool *pgxpool.Pool) int64 {
	b.Helper()
	var id int64
	err := pool.QueryRow(context.Background(), `
WITH t AS (INSERT INTO tenants (name) VALUES ('acme') ON CONFLICT (name) DO NOTHING RETURNING id)
SELECT id FROM t UNION ALL SELECT id FROM tenants WHERE name = 'acme'`).Scan(&id)
	if err != nil {
		b.Fatalf("bench: tenant: %v", err)
	}
	return id
}

// okSender is a provider that accepts every send at once.
var okSender = ops.SenderFunc(func(_ context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
	return ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200, ProviderRequestID: "req_" + op.ID,
		Result: &ops.Result{ProviderRef: "re_" + op.ID, ProviderRequestID: "req_" + op.ID}}
})

// intent returns the i-th refund intent of a run.
func intent(tenantID int64, run string, i int) ops.Intent {
	order := fmt.Sprintf("ord-%s-%d", run, i)
	return ops.Intent{TenantID: tenantID, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: order + ":3800:usd", Fingerprint: "fp-" + order, OrderRef: order, CustomerRef: "cus_1",
		PaymentRef: "pi_1", AmountCents: 3800, Currency: "usd", Request: []byte(`{"amount":3800}`),
		Retention: 24 * time.Hour}
}

// admitted is in as the client request ref that owner sends and admits, leased to owner.
func admitted(in ops.Intent, ref, owner string) ops.Intent {
	in.RequestRef, in.Owner = ref, owner
	return in
}

// benchSettle runs the ledger with the given number of group-commit flushers (0: every
// write on its own), to show what batching concurrent writes buys. params is appended to
// the connection string: settle_custom_plans sets plan_cache_mode=auto, which the ledger's
// write pool then keeps, to show what their generic plans buy.
func benchSettle(b *testing.B, variant string, flushers int, params string) {
	url := database(b, settleDB, true)
	measure(b, variant, settleDB, "lifecycles/s", func() (func(ctx context.Context, i int) error, func()) {
		return settleLifecycles(b, url, flushers, params)
	})
}

// settleLifecycles opens the ledger on url and returns the i-th lifecycle of a new run, and
// the function that closes the ledger's pool.
func settleLifecycles(b *testing.B, url string, flushers int, params string) (func(ctx context.Context, i int) error, func()) {
	ctx := context.Background()
	// As settle serve opens it (SETTLE_DB_POOLER=auto): prepared statements on this direct
	// connection.
	db, err := pg.Open(ctx, url+params, pg.PreparedWhenDirect())
	if err != nil {
		b.Fatal(err)
	}
	db.SetGroupCommit(flushers)
	ledger := testworld.RegisterKinds(ops.NewLedger(db, ops.SystemClock{}))
	tid := tenant(b, db.Pool)
	run := runID()
	return func(ctx context.Context, i int) error {
		owner := fmt.Sprintf("client-%d", i%clients)
		o, err := ledger.Admit(ctx, admitted(intent(tid, run, i), fmt.Sprintf("req-%s-%d", run, i), owner))
		if err != nil {
			return err
		}
		op, err := ledger.Run(ctx, o.Op, okSender, ops.RunSpec{Owner: owner, First: o.Attempt})
		if err != nil {
			return err
		}
		if op.Status != ops.StatusSucceeded {
			return fmt.Errorf("operation %s is %s", op.ID, op.Status)
		}
		return nil
	}, db.Close
}

func benchNaive(b *testing.B) {
	url := database(b, naiveDB, true)
	measure(b, "naive", naiveDB, "lifecycles/s", func() (func(ctx context.Context, i int) error, func()) {
		return naiveLifecycles(b, url)
	})
}

// naiveLifecycles opens a pool on url with Settle's settings and returns the i-th naive
// lifecycle of a new run, and the function that closes the pool.
func naiveLifecycles(b *testing.B, url string) (func(ctx context.Context, i int) error, func()) {
	db, err := pg.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	tid := tenant(b, db.Pool)
	run := runID()
	return func(ctx context.Context, i int) error {
		return naiveLifecycle(ctx, db.Pool, intent(tid, run, i), fmt.Sprintf("req-%s-%d", run, i), fmt.Sprintf("client-%d", i%clients))
	}, db.Close
}

// naiveLifecycle is the lifecycle as one would first write it: open, claim with the
// attempt, close, each a transaction of its own and each statement a round trip. It writes
// the same rows as Settle's.
func naiveLifecycle(ctx context.Context, pool *pgxpool.Pool, in ops.Intent, requestRef, owner string) error {
	id := ops.NewOperationID()
	pkey := ops.ProviderKeyFor(id)
	now := time.Now().UTC()
	lease, retryUntil := now.Add(ops.DefaultLimits.Lease), now.Add(in.Retention-ops.DefaultLimits.RetentionMargin)

	// 1. Open: the operation, the client request and the audit row.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, order_ref, customer_ref,
	payment_ref, amount_cents, currency, request, status, retention_seconds, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'received', $14, $15, $15)`,
			id, in.TenantID, string(in.Kind), in.Provider, in.IntentKey, pkey, in.Fingerprint, in.OrderRef, in.CustomerRef,
			in.PaymentRef, in.AmountCents, in.Currency, string(in.Request), int64(in.Retention/time.Second), now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, answer, received_at, answered_at)
VALUES ($1, $2, $3, $4, 'new', $5, $5)`, in.TenantID, id, string(in.Kind), requestRef, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
INSERT INTO audit_log (at, actor, action, entity, entity_id, after)
VALUES ($1, $2, 'open', 'operation', $3, '{"status": "received", "version": 1}')`, now, owner, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}

	// 2. Claim: lease the operation and begin the first attempt.
	var attemptID int64
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
UPDATE operations SET status = 'in_progress', phase = 'sending', lease_owner = $2, lease_until = $3, attempts = 1,
	first_sent_at = $4, retry_until = $5, version = version + 1, updated_at = $4
WHERE id = $1 AND version = 1 AND status = 'received'`, id, owner, lease, now, retryUntil)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return errors.New("claim lost")
		}
		return tx.QueryRow(ctx, `
INSERT INTO attempts (operation_id, n, provider_key, owner, started_at) VALUES ($1, 1, $2, $3, $4) RETURNING id`,
			id, pkey, owner, now).Scan(&attemptID)
	})
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}

	// The send.
	ref, prid := "re_"+id, "req_"+id
	done := time.Now().UTC()

	// 3. Close: the attempt's end, the operation, evidence, audit and outbox.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
UPDATE attempts SET finished_at = $2, outcome = 'ok', http_status = 200, provider_request_id = $3 WHERE id = $1`,
			attemptID, done, prid); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
UPDATE operations SET status = 'succeeded', phase = '', lease_until = NULL, provider_ref = $2, provider_request_id = $3,
	version = version + 1, updated_at = $4, closed_at = $4, closed_by = $5
WHERE id = $1 AND version = 2 AND status = 'in_progress' AND lease_owner = $5`, id, ref, prid, done, owner)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return errors.New("close lost")
		}
		var evidenceID int64
		if err := tx.QueryRow(ctx, `
INSERT INTO evidence (operation_id, kind, provider_ref, summary, recorded_by, recorded_at)
VALUES ($1, 'provider_response', $2, $3, $4, $5) RETURNING id`,
			id, ref, "The provider answered the attempt with "+ref+".", owner, done).Scan(&evidenceID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
INSERT INTO audit_log (at, actor, action, entity, entity_id, before, after, reason, evidence_id)
VALUES ($1, $2, 'attempt.ok', 'operation', $3, '{"status": "in_progress", "version": 2}',
	'{"status": "succeeded", "version": 3, "phase": ""}', 'attempt ok', $4)`, done, owner, id, evidenceID); err != nil {
			return err
		}
		eventID := ops.NewOperationID()
		_, err = tx.Exec(ctx, `
INSERT INTO outbox (event_id, topic, entity_id, payload, created_at)
VALUES ($1::uuid, 'operation.succeeded', $2::text, jsonb_build_object('event_id', $1::text, 'operation_id', $2::text,
	'tenant_id', $3::bigint, 'kind', $4::text, 'status', 'succeeded', 'previous_status', 'in_progress', 'version', 3,
	'provider_ref', $5::text, 'actor', $6::text, 'at', $7::timestamptz), $7)`,
			eventID, id, in.TenantID, string(in.Kind), ref, owner, done)
		return err
	})
	if err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// noopArgs is River's job: nothing to do, so the figure is River's own overhead.
type noopArgs struct{}

// Kind implements river.JobArgs.
func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

// Work implements river.Worker.
func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

var riverMigrated bool

func benchRiver(b *testing.B, variant string, setup riverSetup) {
	ctx := context.Background()
	url := database(b, riverDB, false)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = riverPoolConns
	if !riverMigrated {
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
		if err == nil {
			_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		}
		pool.Close()
		if err != nil {
			b.Fatalf("bench: migrate river: %v", err)
		}
		riverMigrated = true
	}
	before := counts(b, riverDB)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:            slog.New(slog.DiscardHandler),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: setup.maxWorkers}},
		Workers:           workers,
		FetchCooldown:     setup.fetchCooldown,
		FetchPollInterval: setup.fetchPoll,
	})
	if err != nil {
		b.Fatal(err)
	}
	completed, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: b.N + 1000,
		Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancel()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	start := time.Now()
	insertErr := make(chan error, 1)
	go func() {
		_, err := runClients(b.N, func(ctx context.Context, _ int) error {
			_, err := client.Insert(ctx, noopArgs{}, nil)
			return err
		})
		insertErr <- err
	}()
	timeout := time.After(10 * time.Minute)
	for done := 0; done < b.N; {
		select {
		case ev := <-completed:
			if ev == nil {
				b.Fatal("bench: river closed the subscription")
			}
			done++
		case err := <-insertErr:
			if err != nil {
				b.Fatal(err)
			}
			insertErr = nil
		case <-timeout:
			b.Fatalf("bench: river completed %d of %d jobs in 10 minutes", done, b.N)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if insertErr != nil {
		if err := <-insertErr; err != nil {
			b.Fatal(err)
		}
	}
	stopCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if err := client.Stop(stopCtx); err != nil {
		b.Fatalf("bench: stop river: %v", err)
	}
	pool.Close()
	report(b, variant, "jobs/s", elapsed, before, counts(b, riverDB))
}
