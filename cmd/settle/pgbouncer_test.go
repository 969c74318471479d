package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/refund"
)

// Two 'settle serve' replicas reach Postgres only through pgbouncer in transaction mode,
// with fewer server connections than the replicas open: both migrate the empty database at
// once, refunds and chat completions sent to one and retried on the other are made once at
// the provider, every outbox event is delivered once although both relay, the reconciler
// records each refund once although both reconcile every second, and one replica evaluates
// the alerts.
func TestReplicasThroughPgbouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := emptyDatabase(t)
	bouncer := startPgbouncer(t, direct, 3)
	namedStatementsBreak(t, bouncer.URL())

	fk := fake.NewStripe(fake.StripeOptions{Seed: 1})
	stripeBase, err := fk.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fk.Close()
	llm := fake.NewLLM(fake.LLMOptions{Seed: 1})
	llmBase, err := llm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer llm.Close()
	events := &eventLog{seen: map[string]int{}}
	receiver := httptest.NewServer(events)
	defer receiver.Close()

	env := []string{"DATABASE_URL=" + bouncer.URL(), "STRIPE_API_KEY=sk_test_bouncer", "STRIPE_API_BASE=" + stripeBase,
		"SETTLE_LLM_BASE_URL=" + llmBase, "SETTLE_LLM_API_KEY=sk-test", "SETTLE_OUTBOX_URL=" + receiver.URL,
		"SETTLE_ROLE_LEASE=" + testRoleLease.String(), "SETTLE_RECONCILE_INTERVAL=" + testReconInterval.String(), "SETTLE_WORKERS=0"}
	a := startReplica(t, "bouncer1", []string{"--migrate"}, env...)
	b := startReplica(t, "bouncer2", []string{"--migrate"}, env...)
	waitHealthy(t, a, b)

	db, err := pg.Open(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tenant, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	token, err := db.CreateToken(ctx, tenant.ID, "bouncer")
	if err != nil {
		t.Fatal(err)
	}
	const refunds, chats = 8, 6
	for i := 1; i <= refunds; i++ {
		fk.AddPaymentIntent(fmt.Sprintf("pi_%d", i), 3800, "usd", fake.OwnedBy("shop"))
	}
	sent := time.Now()
	sendTwice(t, refunds, func(i int, r *replica) string { return refundOnce(t, r, token, i) }, a, b)
	sendTwice(t, chats, func(i int, r *replica) string { return chatOnce(t, r, token, i) }, a, b)
	if n := len(fk.Refunds()); n != refunds {
		t.Errorf("Stripe made %d refunds for %d intents", n, refunds)
	}
	if n := len(llm.Generations()); n != chats {
		t.Errorf("the LLM generated %d completions for %d keys", n, chats)
	}
	checkRolesRanOnce(t, db, events, sent, refunds)
	checkPooled(t, bouncer, 3)
}

// emptyDatabase creates a database with no schema on the test cluster, dropped when the
// test ends, and returns its connection string.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	pgtest.NewDatabase(t) // starts the cluster
	ctx := context.Background()
	name := fmt.Sprintf("bouncer_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	admin, err := pgx.Connect(ctx, pgtest.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if a, err := pgx.Connect(ctx, pgtest.URL("postgres")); err == nil {
			_, _ = a.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			a.Close(ctx)
		}
	})
	return pgtest.URL(name)
}

// namedStatementsBreak shows the pooler is one Settle must be careful with: pgx's default,
// named prepared statements cached per connection, fails through it once several clients
// share its server connections.
func namedStatementsBreak(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url+"&default_query_exec_mode=cache_statement&pool_max_conns=8")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var failed atomic.Value
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				var n int
				if err := pool.QueryRow(ctx, `SELECT $1::int + $2::int`, g, i).Scan(&n); err != nil {
					failed.Store(err.Error())
					return
				}
			}
		}()
	}
	wg.Wait()
	if msg, _ := failed.Load().(string); !strings.Contains(msg, "prepared statement") {
		t.Fatalf("named prepared statements worked through pgbouncer (%q): it is not pooling transactions", msg)
	}
}

// sendTwice sends each of n intents to a and then, as a client's retry, to b, n at once,
// and checks both answers name the same provider record.
func sendTwice(t *testing.T, n int, send func(i int, r *replica) string, a, b *replica) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := send(i, a)
			if again := send(i, b); first == "" || again != first {
				t.Errorf("intent %d: answered %q by %s, %q on retry by %s; want one record", i, first, a.name, again, b.name)
			}
		}()
	}
	wg.Wait()
}

// refundOnce asks r to refund order i and returns the refund's id.
func refundOnce(t *testing.T, r *replica, token string, i int) string {
	body := fmt.Sprintf(`{"order_id":"o-%d","amount_cents":3800,"currency":"usd","payment_intent":"pi_%d"}`, i, i)
	status, out := postAPI(t, r.url()+"/api/v1/refunds", token, body, "")
	var ans refund.Answer
	if err := json.Unmarshal(out, &ans); err != nil || status != http.StatusOK || ans.Status != refund.Refunded {
		t.Errorf("refund %d on %s: %d %s", i, r.name, status, out)
	}
	return ans.RefundID
}

// chatOnce sends chat completion i with its Idempotency-Key to r and returns the
// completion's id. It asks to wait for a call in flight: a retry may come while the replica
// that answered still writes the call's close, which follows its answer (ops rules 2, 3).
func chatOnce(t *testing.T, r *replica, token string, i int) string {
	body := fmt.Sprintf(`{"model":"fake-small","messages":[{"role":"user","content":"question %d"}]}`, i)
	status, out := postAPI(t, r.url()+"/v1/chat/completions", token, body, fmt.Sprintf("chat-%d", i), "Prefer", "wait=10")
	var ans struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &ans); err != nil || status != http.StatusOK {
		t.Errorf("chat %d on %s: %d %s", i, r.name, status, out)
	}
	return ans.ID
}

// postAPI posts body with token and key to url, with header's name and value pairs.
func postAPI(t *testing.T, url, token, body, key string, header ...string) (int, []byte) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", url, err)
		return 0, nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// eventLog is an outbox receiver: how often each event id arrived.
type eventLog struct {
	mu   sync.Mutex
	seen map[string]int
}

func (l *eventLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	l.mu.Lock()
	l.seen[r.Header.Get("Settle-Event-Id")]++
	l.mu.Unlock()
}

// counts returns how many distinct events arrived and how many arrived more than once.
func (l *eventLog) counts() (distinct, repeated int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.seen {
		if n > 1 {
			repeated++
		}
	}
	return len(l.seen), repeated
}

// checkRolesRanOnce waits for the background roles to catch up with the traffic sent since
// sent, and checks that what each does was done once.
func checkRolesRanOnce(t *testing.T, db *pg.DB, events *eventLog, sent time.Time, refunds int) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, 20*time.Second, "the reconciler did not run after the refunds", func() bool {
		var last *time.Time
		if err := db.Pool.QueryRow(ctx, `SELECT last_run_at FROM recon_runs WHERE name = $1`, recon.LeaseName("stripe")).Scan(&last); err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		return last != nil && last.After(sent.Add(time.Second))
	})
	var charges, doubles int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM provider_charges WHERE provider = 'stripe'),
	(SELECT count(*) FROM recon_exceptions WHERE kind = 'double_charge')`).Scan(&charges, &doubles); err != nil {
		t.Fatal(err)
	}
	if charges != refunds || doubles != 0 {
		t.Errorf("after reconciling on both replicas: %d Stripe charges recorded for %d refunds, %d double charges", charges, refunds, doubles)
	}
	var stored, pending int
	waitFor(t, 20*time.Second, "the outbox was not relayed", func() bool {
		if err := db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE published_at IS NULL) FROM outbox`).Scan(&stored, &pending); err != nil {
			t.Fatal(err)
		}
		distinct, _ := events.counts()
		return stored > 0 && pending == 0 && distinct == stored
	})
	if _, repeated := events.counts(); repeated > 0 {
		t.Errorf("%d of %d outbox events were delivered more than once by the two relays", repeated, stored)
	}
	if l := readLease(t, db, alertsRole); !strings.HasPrefix(l.owner, "alerts:bouncer") {
		t.Errorf("the alert evaluator's lease is held by %q, not one replica", l.owner)
	}
}

// checkPooled checks, on pgbouncer's admin console, that the replicas' transactions went
// through one transaction-mode pool of at most servers server connections.
func checkPooled(t *testing.T, b *pgbouncer, servers int) {
	t.Helper()
	var buf bytes.Buffer
	for _, p := range b.show(t, "POOLS") {
		if p["database"] != "settle" {
			continue
		}
		fmt.Fprintf(&buf, "%v ", p)
		if p["pool_mode"] != "transaction" {
			t.Errorf("pool_mode %v, want transaction", p["pool_mode"])
		}
	}
	for _, s := range b.show(t, "SERVERS") {
		if s["database"] == "settle" {
			servers--
		}
	}
	if servers < 0 {
		t.Errorf("pgbouncer opened more server connections than its pool allows: %s", buf.String())
	}
	for _, s := range b.show(t, "STATS") {
		if s["database"] == "settle" {
			t.Logf("through pgbouncer: %s transactions, %s queries", number(s["total_xact_count"]), number(s["total_query_count"]))
		}
	}
}

// number prints a figure of the admin console, which answers in numeric.
func number(v any) string {
	if n, ok := v.(pgtype.Numeric); ok && n.Int != nil {
		return n.Int.String()
	}
	return fmt.Sprint(v)
}
