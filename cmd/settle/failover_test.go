package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/localpg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

// failoverOrders is how many refunds the failover test's clients ask for, each of its own
// payment.
const failoverOrders = 30

// failoverReplicaNames names the 'settle serve' replicas; once the standby is promoted each
// is asked for one more refund, on a payment of its own.
var failoverReplicaNames = []string{"replica-a", "replica-b"}

// A primary with a synchronous streaming standby, two 'settle serve' replicas on
// DATABASE_URL naming both hosts with target_session_attrs=read-write, and refunds flowing
// through both to a fake Stripe that takes a second per refund. The primary is stopped as by
// a crash while refunds wait on Stripe; the standby is promoted. Then: both replicas said not
// ready while no primary answered and ready after, without a restart; every refund whose
// Stripe answer was lost with the primary was resumed with its own key and is one refund at
// Stripe; and every answer a client got names rows the new primary holds.
func TestFailoverToAPromotedStandby(t *testing.T) {
	testtool.Heavy(t, "a failover to a standby")
	t.Parallel()
	ctx := context.Background()
	primary, standby := startReplicatedPair(t)
	dbURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/settle?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Port, standby.Port)
	token := seedFailoverDatabase(t, primary.URL("settle"))

	fk := fake.NewStripe(fake.StripeOptions{Seed: 1})
	base, err := fk.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fk.Close()
	for i := range failoverOrders + len(failoverReplicaNames) {
		fk.AddPaymentIntent(fmt.Sprintf("pi_fo_%02d", i), int64(1000+i), "usd", fake.OwnedBy("shop"))
	}
	fk.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultSlow, Delay: time.Second})

	tr := &failoverTraffic{token: token, client: &http.Client{Timeout: 15 * time.Second}, others: map[int]int{}}
	for _, name := range failoverReplicaNames {
		tr.replicas = append(tr.replicas, startFailoverReplica(t, name, dbURL, base))
	}
	trafficDone := tr.start(6, time.Now().Add(50*time.Second))

	inFlight := killPrimaryMidRefund(t, tr, primary.URL("settle"), primary.StopImmediate)
	killed := time.Now()
	for _, r := range tr.replicas {
		waitReady(t, r, http.StatusServiceUnavailable, 10*time.Second, "after the primary stopped")
	}
	// Every refund in flight has its Stripe answer by now, and could not record it.
	time.Sleep(time.Until(killed.Add(2 * time.Second)))
	for _, r := range tr.replicas {
		if code := readyStatus(r); code != http.StatusServiceUnavailable {
			t.Errorf("%s: /readyz = %d with the primary gone and the standby not promoted, want 503", r.name, code)
		}
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	for _, r := range tr.replicas {
		waitReady(t, r, http.StatusOK, 15*time.Second, "after the standby was promoted")
	}
	// Each replica serves a refund of its own after the promotion, so both are seen to have
	// reconnected whatever order the clients' retries happened to take.
	for i, r := range tr.replicas {
		tr.refundUntilDone([]*replica{r}, 0, failoverOrders+i, time.Now().Add(20*time.Second))
	}
	<-trafficDone

	db, err := pg.Open(ctx, standby.URL("settle"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tr.checkEveryOrderRefundedOnce(t, db, fk)
	tr.checkAnswersKept(t, db)
	tr.checkServedAfter(t, promoted)
	checkResumedWithTheirKeys(t, db, fk, inFlight)
	t.Logf("answers other than 200 during the failover, by status: %v", tr.others)
}

// startReplicatedPair starts a primary whose commits wait for its standby
// (synchronous_standby_names, synchronous_commit=on) and that standby, streaming.
func startReplicatedPair(t *testing.T) (primary, standby *localpg.Cluster) {
	t.Helper()
	ctx := context.Background()
	root := filepath.Join(pgtest.ProjectDir(), ".settle")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(root, "failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	primary, err = localpg.Start(ctx, localpg.Options{Dir: filepath.Join(dir, "primary"),
		Settings: map[string]string{"synchronous_standby_names": "standby1", "synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Stop(); os.RemoveAll(primary.Dir) })
	standby, err = localpg.Start(ctx, localpg.Options{Dir: filepath.Join(dir, "standby"),
		StandbyOf: primary.URL("postgres") + "&application_name=standby1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { standby.Stop(); os.RemoveAll(standby.Dir) })
	if err := primary.WaitSynchronous(ctx, "standby1"); err != nil {
		t.Fatal(err)
	}
	return primary, standby
}

// seedFailoverDatabase creates and migrates Settle's database on the primary, with the
// tenant shop, and returns shop's API token.
func seedFailoverDatabase(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, strings.Replace(url, "/settle?", "/postgres?", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE settle"); err != nil {
		t.Fatal(err)
	}
	db, err := pg.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tenant, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	token, err := db.CreateToken(ctx, tenant.ID, "failover")
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// startFailoverReplica starts a replica on dbURL and the fake Stripe at stripeBase, with env
// added to its environment, and waits until it is ready.
func startFailoverReplica(t *testing.T, name, dbURL, stripeBase string, env ...string) *replica {
	t.Helper()
	r := startReplica(t, name, nil, append([]string{"DATABASE_URL=" + dbURL, "STRIPE_API_KEY=sk_test_failover",
		"STRIPE_API_BASE=" + stripeBase, "SETTLE_RECONCILE_INTERVAL=off", "SETTLE_WORKERS=0", "SETTLE_OPERATION_LEASE=5s",
		"SETTLE_LOG_LEVEL=warn"}, env...)...)
	waitReady(t, r, http.StatusOK, 10*time.Second, "at start")
	return r
}

// readyStatus is the replica's /readyz status, 0 when it does not answer.
func readyStatus(r *replica) int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + r.addr + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitReady(t *testing.T, r *replica, want int, within time.Duration, when string) {
	t.Helper()
	var code int
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if code = readyStatus(r); code == want {
			return
		}
	}
	t.Fatalf("%s: /readyz = %d %s, want %d within %s\n%s", r.name, code, when, want, within, r.p.Out)
}

// killPrimaryMidRefund stops the primary at url with kill, as by a crash, once some refunds
// are done and at least two are waiting on Stripe, and returns the operations of those
// refunds in flight.
func killPrimaryMidRefund(t *testing.T, tr *failoverTraffic, url string, kill func() error) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var inFlight []string
		err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT a.operation_id::text), '{}')
			FROM attempts a JOIN operations o ON o.id = a.operation_id WHERE a.finished_at IS NULL AND o.kind = 'refund'`).Scan(&inFlight)
		if err != nil {
			t.Fatal(err)
		}
		if tr.refunded() >= 6 && len(inFlight) >= 2 {
			if err := kill(); err != nil {
				t.Fatal(err)
			}
			return inFlight
		}
	}
	t.Fatalf("no moment with 6 refunds done and 2 in flight: %d done", tr.refunded())
	return nil
}

// failoverTraffic is clients asking for refunds through both replicas, each retrying its
// order, on the other replica in turn, until it is answered refunded.
type failoverTraffic struct {
	token    string
	client   *http.Client
	replicas []*replica

	mu      sync.Mutex
	answers []failoverAnswer // every 200 a client got
	missed  []string         // orders not refunded before the deadline
	others  map[int]int      // how many requests were answered with each other status
}

// failoverAnswer is one answer a client got.
type failoverAnswer struct {
	replica, order, requestID string
	at                        time.Time
	answer                    refund.Answer
}

// start runs workers clients over the orders until each is refunded or deadline passes; the
// channel closes when they have all stopped.
func (tr *failoverTraffic) start(workers int, deadline time.Time) <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < failoverOrders; i += workers {
				tr.refundUntilDone(tr.replicas, w+i, i, deadline)
			}
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// refundUntilDone asks for order i, on each of replicas in turn, until it is answered
// refunded or deadline passes.
func (tr *failoverTraffic) refundUntilDone(replicas []*replica, turn, i int, deadline time.Time) {
	order := fmt.Sprintf("fo-%02d", i)
	body := fmt.Sprintf(`{"order_id":%q,"amount_cents":%d,"currency":"usd","payment_intent":"pi_fo_%02d"}`, order, 1000+i, i)
	for ; time.Now().Before(deadline); turn++ {
		r := replicas[turn%len(replicas)]
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/api/v1/refunds", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tr.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := tr.client.Do(req)
		if err == nil && resp.StatusCode != http.StatusOK {
			tr.mu.Lock()
			tr.others[resp.StatusCode]++
			tr.mu.Unlock()
		}
		if err == nil {
			var a refund.Answer
			derr := json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && derr == nil {
				tr.mu.Lock()
				tr.answers = append(tr.answers, failoverAnswer{replica: r.name, order: order,
					requestID: resp.Header.Get("X-Request-Id"), at: time.Now(), answer: a})
				tr.mu.Unlock()
				if a.Status == refund.Refunded {
					return
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	tr.mu.Lock()
	tr.missed = append(tr.missed, order)
	tr.mu.Unlock()
}

// refunded counts the orders answered refunded so far.
func (tr *failoverTraffic) refunded() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, a := range tr.answers {
		if a.answer.Status == refund.Refunded {
			n++
		}
	}
	return n
}

// checkEveryOrderRefundedOnce: every order was answered refunded, Stripe holds exactly one
// refund per payment, and the new primary's operation of each names that refund.
func (tr *failoverTraffic) checkEveryOrderRefundedOnce(t *testing.T, db *pg.DB, fk *fake.Stripe) {
	t.Helper()
	if len(tr.missed) > 0 {
		t.Errorf("orders never answered refunded: %v\n%s\n%s", tr.missed, tr.replicas[0].p.Out, tr.replicas[1].p.Out)
	}
	byPayment := map[string][]fake.Refund{}
	for _, r := range fk.Refunds() {
		byPayment[r.PaymentIntent] = append(byPayment[r.PaymentIntent], r)
	}
	for i := range failoverOrders + len(failoverReplicaNames) {
		pi := fmt.Sprintf("pi_fo_%02d", i)
		if n := len(byPayment[pi]); n != 1 {
			t.Errorf("%s: %d refunds at Stripe, want 1", pi, n)
			continue
		}
		var id string
		if err := db.Pool.QueryRow(context.Background(), `SELECT id::text FROM operations WHERE payment_ref = $1`, pi).Scan(&id); err != nil {
			t.Errorf("%s: no single operation on the new primary: %v", pi, err)
			continue
		}
		op, err := db.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r := byPayment[pi][0]; op.Status != ops.StatusSucceeded || op.ProviderRef != r.ID || op.ProviderKey != r.IdempotencyKey {
			t.Errorf("%s: operation %s is %s with refund %q; Stripe's refund is %s, made with the operation's key: %v",
				pi, op.ID, op.Status, op.ProviderRef, r.ID, op.ProviderKey == r.IdempotencyKey)
		}
	}
}

// checkAnswersKept: every answer a client got was committed before it was sent, so the
// promoted standby holds its client request and its operation, and a refund it named.
func (tr *failoverTraffic) checkAnswersKept(t *testing.T, db *pg.DB) {
	t.Helper()
	ctx := context.Background()
	for _, a := range tr.answers {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM client_requests WHERE request_id = $1 AND operation_id = $2`,
			a.requestID, a.answer.OperationID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("request %s (%s via %s, answered %s) left %d client requests on the new primary, want 1",
				a.requestID, a.order, a.replica, a.answer.Status, n)
		}
		op, err := db.Get(ctx, a.answer.OperationID)
		if err != nil {
			t.Errorf("operation %s answered to %s is lost: %v", a.answer.OperationID, a.order, err)
			continue
		}
		if a.answer.Status == refund.Refunded && (op.Status != ops.StatusSucceeded || op.ProviderRef != a.answer.RefundID) {
			t.Errorf("%s was answered refunded with %s; the new primary has %s with %q", a.order, a.answer.RefundID, op.Status, op.ProviderRef)
		}
	}
}

// checkServedAfter: both replicas answered refunds after the promotion, on connections
// they opened themselves.
func (tr *failoverTraffic) checkServedAfter(t *testing.T, promoted time.Time) {
	t.Helper()
	served := map[string]int{}
	for _, a := range tr.answers {
		if a.at.After(promoted) && a.answer.Status == refund.Refunded {
			served[a.replica]++
		}
	}
	for _, r := range tr.replicas {
		if served[r.name] == 0 {
			t.Errorf("%s answered no refund after the promotion\n%s", r.name, r.p.Out)
		}
	}
}

// checkResumedWithTheirKeys: the refunds in flight when the primary died succeeded, every
// attempt of each carried its operation's one provider key, and at least one was sent again
// after its Stripe answer was lost with the primary.
func checkResumedWithTheirKeys(t *testing.T, db *pg.DB, fk *fake.Stripe, inFlight []string) {
	t.Helper()
	ctx := context.Background()
	resent := 0
	for _, id := range inFlight {
		op, err := db.Get(ctx, id)
		if err != nil {
			t.Errorf("operation %s, in flight at the failover, is lost: %v", id, err)
			continue
		}
		var keys []string
		if err := db.Pool.QueryRow(ctx, `SELECT array_agg(provider_key ORDER BY n) FROM attempts WHERE operation_id = $1`, id).Scan(&keys); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k != op.ProviderKey {
				t.Errorf("operation %s sent an attempt with key %q, not its own %q", id, k, op.ProviderKey)
			}
		}
		if len(keys) > 1 {
			resent++
		}
		if op.Status != ops.StatusSucceeded {
			t.Errorf("operation %s, in flight at the failover, is %s, want succeeded", id, op.Status)
		}
	}
	if resent == 0 {
		t.Errorf("none of the %d refunds in flight at the failover was sent again", len(inFlight))
	}
	t.Logf("%d refunds in flight at the failover, %d sent again with their keys; %d refunds at Stripe", len(inFlight), resent, len(fk.Refunds()))
}
