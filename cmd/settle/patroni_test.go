package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/localpg"
)

// patroniChats is how many chat completions the Patroni failover test's clients ask for,
// each with its own Idempotency-Key.
const patroniChats = 12

// Two PostgreSQL nodes run by Patroni on one etcd, in synchronous mode, and two
// 'settle serve' replicas on DATABASE_URL naming both nodes with
// target_session_attrs=read-write. Refunds (a fake Stripe taking a second each) and chat
// completions (a fake LLM taking half a second each) flow through both replicas while the
// leader's postmaster is killed with SIGKILL. Then: Patroni promotes the standby; both
// replicas are ready again within Patroni's failover time (ttl + loop_wait) plus 10 s,
// without a restart; every answer a client got names rows the new leader holds; and no
// refund or completion was made twice at the provider (ops rule 3).
func TestFailoverThroughPatroni(t *testing.T) {
	testtool.Heavy(t, "a Patroni failover")
	findPatroni(t)
	t.Parallel()
	patroniFailover(t, false)
}

// The same failover with pgbouncer, in transaction mode, between Settle and Postgres:
// DATABASE_URL names pgbouncer alone, and Patroni's role-change callback on the new leader
// points pgbouncer at it and reloads it. Settle keeps its connections to pgbouncer and is
// ready again within the same bound, and pgbouncer's server connections all go to the new
// leader.
func TestFailoverThroughPatroniAndPgbouncer(t *testing.T) {
	testtool.Heavy(t, "a Patroni failover")
	findPatroni(t)
	findPgbouncer(t)
	t.Parallel()
	patroniFailover(t, true)
}

// patroniFailover runs the failover of the two tests above, through pgbouncer or not.
func patroniFailover(t *testing.T, viaPgbouncer bool) {
	ctx := context.Background()
	began := time.Now()
	cluster := startPatroniCluster(t, viaPgbouncer)
	leader, standby := cluster.nodes[0], cluster.nodes[1]
	t.Logf("Patroni cluster up in %s", time.Since(began).Round(time.Millisecond))
	token := seedFailoverDatabase(t, leader.URL("settle"))
	dbURL := cluster.URL("settle")
	var bouncer *pgbouncer
	if viaPgbouncer {
		// pgbouncer waits server_login_retry after a failed login to the dead leader before
		// it tries again, to the new one once reloaded: 1 s rather than its default 15 s.
		// The callback's RELOAD needs an admin user.
		bouncer = startPgbouncer(t, leader.URL("settle"), 8, "server_login_retry = 1", "admin_users = postgres")
		pgBin, err := localpg.FindBin()
		if err != nil {
			t.Fatal(err)
		}
		cluster.followLeader(t, bouncer, filepath.Join(pgBin, "psql"))
		dbURL = bouncer.URL()
	}

	fk := fake.NewStripe(fake.StripeOptions{Seed: 1})
	stripeBase, err := fk.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fk.Close()
	for i := range failoverOrders + len(failoverReplicaNames) {
		fk.AddPaymentIntent(fmt.Sprintf("pi_fo_%02d", i), int64(1000+i), "usd", fake.OwnedBy("shop"))
	}
	fk.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultSlow, Delay: time.Second})
	llm := fake.NewLLM(fake.LLMOptions{Seed: 1, Latency: 500 * time.Millisecond})
	llmBase, err := llm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer llm.Close()

	// The batch policy never sends an uncertain call again; the interactive one would resend
	// a call whose answer was lost with the leader, and count it as a possible duplicate.
	env := []string{"SETTLE_LLM_BASE_URL=" + llmBase, "SETTLE_LLM_API_KEY=sk-test", "SETTLE_LLM_POLICY=batch"}
	tr := &failoverTraffic{token: token, client: &http.Client{Timeout: 15 * time.Second}, others: map[int]int{}}
	for _, name := range failoverReplicaNames {
		tr.replicas = append(tr.replicas, startFailoverReplica(t, name, dbURL, stripeBase, env...))
	}
	chats := &chatTraffic{token: token, client: tr.client, replicas: tr.replicas, outcomes: map[string]string{}}
	deadline := time.Now().Add(60 * time.Second)
	refundsDone, chatsDone := tr.start(6, deadline), chats.start(3, deadline)

	inFlight := killPrimaryMidRefund(t, tr, leader.URL("settle"), leader.killPostmaster)
	killed := time.Now()
	// A lost leader is replaced within ttl + loop_wait; Settle then has 10 s to find it.
	bound := patroniTTL + patroniLoopWait
	took := cluster.waitRole(t, standby, "leader", bound)
	promoted := time.Now()
	for _, r := range tr.replicas {
		waitReady(t, r, http.StatusOK, time.Until(killed.Add(bound+10*time.Second)), "after Patroni promoted the standby")
	}
	ready := time.Since(killed)
	for i, r := range tr.replicas {
		tr.refundUntilDone([]*replica{r}, 0, failoverOrders+i, time.Now().Add(20*time.Second))
	}
	<-refundsDone
	<-chatsDone

	db, err := pg.Open(ctx, standby.URL("settle"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tr.checkEveryOrderRefundedOnce(t, db, fk)
	tr.checkAnswersKept(t, db)
	tr.checkServedAfter(t, promoted)
	checkResumedWithTheirKeys(t, db, fk, inFlight)
	chats.checkAnswersKept(t, db, llmBase)
	chats.checkGeneratedOnce(t, db, llm)
	if bouncer != nil {
		checkServersOn(t, bouncer, standby.pgPort)
	}
	t.Logf("Patroni promoted %s %s after the kill; both replicas ready %s after it (bound %s); whole test %s",
		standby.name, took.Round(time.Millisecond), ready.Round(time.Millisecond), bound+10*time.Second, time.Since(began).Round(time.Second))
	t.Logf("answers other than 200 to refunds during the failover, by status: %v; chats by outcome: %v", tr.others, chats.tally())
}

// checkServersOn: every server connection pgbouncer b holds for Settle's database goes to
// port, the new leader's.
func checkServersOn(t *testing.T, b *pgbouncer, port int) {
	t.Helper()
	n := 0
	for _, s := range b.show(t, "SERVERS") {
		if s["database"] != "settle" {
			continue
		}
		n++
		if fmt.Sprint(s["port"]) != fmt.Sprint(port) {
			t.Errorf("pgbouncer holds a server connection to %v:%v, not to the new leader on port %d", s["addr"], s["port"], port)
		}
	}
	if n == 0 {
		t.Errorf("pgbouncer holds no server connection for Settle after the failover")
	}
}

// chatTraffic is clients asking for chat completions through the replicas, each retrying its
// key, on the other replica in turn, until it is answered with a completion, or with a 409
// saying the outcome is unknown, or the deadline passes.
type chatTraffic struct {
	token    string
	client   *http.Client
	replicas []*replica

	mu       sync.Mutex
	answers  []chatAnswer      // every completion a client got
	outcomes map[string]string // key → how its client stopped: answered, unknown or missed
	others   map[int]int       // how many requests were answered with each status other than 200
}

// chatAnswer is one completion a client got.
type chatAnswer struct {
	key, replica, requestID, operationID, completionID string
}

func (c *chatTraffic) start(workers int, deadline time.Time) <-chan struct{} {
	done := make(chan struct{})
	c.others = map[int]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < patroniChats; i += workers {
				c.chatUntilDone(w+i, i, deadline)
			}
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

func (c *chatTraffic) chatUntilDone(turn, i int, deadline time.Time) {
	key := fmt.Sprintf("patroni-chat-%02d", i)
	body := fmt.Sprintf(`{"model":"fake-small","messages":[{"role":"user","content":"question %d"}]}`, i)
	outcome := "missed"
	for ; time.Now().Before(deadline); turn++ {
		r := c.replicas[turn%len(c.replicas)]
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := c.client.Do(req)
		if err == nil {
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var a struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(out, &a)
			c.mu.Lock()
			if resp.StatusCode == http.StatusOK && a.ID != "" {
				c.answers = append(c.answers, chatAnswer{key: key, replica: r.name, requestID: resp.Header.Get("X-Request-Id"),
					operationID: resp.Header.Get("Settle-Operation-Id"), completionID: a.ID})
				outcome = "answered"
			} else {
				c.others[resp.StatusCode]++
			}
			c.mu.Unlock()
			if outcome == "answered" {
				break
			}
			if resp.StatusCode == http.StatusConflict && strings.Contains(string(out), "outcome_unknown") {
				// The batch policy's answer for a call whose answer was lost with the leader:
				// nothing more is sent for this key.
				outcome = "unknown"
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.mu.Lock()
	c.outcomes[key] = outcome
	c.mu.Unlock()
}

// tally counts the clients by how they stopped, and the other statuses they met.
func (c *chatTraffic) tally() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[string]int{}
	for _, o := range c.outcomes {
		n[o]++
	}
	for status, k := range c.others {
		n[fmt.Sprint(status)] += k
	}
	return n
}

// checkAnswersKept: every completion a client got was generated by an operation committed
// before it was sent, so the new leader holds its client request and its operation, closed
// succeeded with that completion, or, where the failover lost the close written after the
// answer, open until a lookup at the provider (lookups, at llmBase) closes it so. Every
// client stopped with an answer or with the outcome said to be unknown, never by running
// out of time.
func (c *chatTraffic) checkAnswersKept(t *testing.T, db *pg.DB, llmBase string) {
	t.Helper()
	ctx := context.Background()
	up, err := openai.New(openai.Config{BaseURL: llmBase, APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	lookups := &llm.Lookups{Ledger: testworld.RegisterKinds(ops.NewLedger(db, ops.SystemClock{})), Events: db, Store: up, Prices: llm.DefaultPrices()}
	for key, o := range c.outcomes {
		if o == "missed" {
			t.Errorf("chat %s was neither answered nor said unknown before the deadline", key)
		}
	}
	for _, a := range c.answers {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM client_requests WHERE request_id = $1 AND operation_id = $2`,
			a.requestID, a.operationID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("chat request %s (%s via %s) left %d client requests on the new leader, want 1", a.requestID, a.key, a.replica, n)
		}
		op, err := db.Get(ctx, a.operationID)
		if err != nil {
			t.Errorf("operation %s answered to chat %s is lost: %v", a.operationID, a.key, err)
			continue
		}
		if (op.Status == ops.StatusUnknown || op.Status == ops.StatusInProgress) && op.ProviderRef == "" {
			// The client had its completion before the close was written, and the failover
			// lost the close: the operation stayed open, never succeeded without it (ops rule
			// 9), and a lookup at the provider settles it with that completion (ops rule 11).
			_, applied, err := lookups.Lookup(ctx, op, "failover-check")
			if err != nil {
				t.Errorf("the lookup of chat %s, whose close the failover lost: %v", a.key, err)
				continue
			}
			t.Logf("chat %s: its close was lost at the failover; its lookup closed it %s", a.key, applied.Outcome)
			op = applied.Op
		}
		if op.Status != ops.StatusSucceeded || op.ProviderRef != a.completionID {
			t.Errorf("chat %s was answered with %s; the new leader has %s with %q", a.key, a.completionID, op.Status, op.ProviderRef)
		}
	}
}

// checkGeneratedOnce: the fake LLM generated each key's call at most once, and each
// generation belongs to the one operation the new leader holds for its key (Settle tags every
// call with its operation). An answered key was generated exactly once.
func (c *chatTraffic) checkGeneratedOnce(t *testing.T, db *pg.DB, llm *fake.LLM) {
	t.Helper()
	ctx := context.Background()
	byOperation := map[string]int{}
	for _, g := range llm.Generations() {
		byOperation[g.Metadata["settle_operation_id"]]++
	}
	for i := range patroniChats {
		key := fmt.Sprintf("patroni-chat-%02d", i)
		var opIDs []string
		if err := db.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(id::text), '{}') FROM operations WHERE kind = 'llm_call' AND intent_key = $1`,
			key).Scan(&opIDs); err != nil {
			t.Fatal(err)
		}
		generated := 0
		for _, id := range opIDs {
			generated += byOperation[id]
			delete(byOperation, id)
		}
		switch {
		case len(opIDs) != 1:
			t.Errorf("chat %s has %d operations on the new leader, want 1", key, len(opIDs))
		case generated > 1:
			t.Errorf("chat %s was generated %d times at the LLM", key, generated)
		case generated == 0 && c.outcomes[key] == "answered":
			t.Errorf("chat %s was answered but the LLM generated nothing for operation %s", key, opIDs[0])
		}
	}
	for id, n := range byOperation {
		t.Errorf("the LLM generated %d completions for %q, which is no operation of the chats on the new leader", n, id)
	}
}
