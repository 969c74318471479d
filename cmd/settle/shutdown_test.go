package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/proctest"
	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

// settleBinary is the settle program, built once for the tests that run it as a process.
var settleBinary = &proctest.Binary{Package: "github.com/settle-dev/settle/cmd/settle", AtExit: pgtest.AtExit}

// SIGTERM while Stripe takes its time to answer a refund: the server stops accepting at
// once, waits for the refund, records it and answers the client "refunded", then exits 0.
// By default it waits as long as a refund call may last, plus 10 s.
func TestSigtermFinishesARefundInFlight(t *testing.T) {
	testtool.Heavy(t, "a settle process stopped with SIGTERM")
	t.Parallel()
	for _, tc := range []struct {
		name  string
		delay time.Duration
		env   []string
	}{
		{"Stripe answers after 5 s", 5 * time.Second, nil},
		// Longer than a fixed 15 s would wait, within the call's deadline of 25 s.
		{"Stripe answers after 17 s", 17 * time.Second, []string{"SETTLE_STRIPE_TIMEOUT=20s", "SETTLE_REFUND_DEADLINE=25s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sigtermDuringRefund(t, tc.delay, tc.env...)
		})
	}
}

func sigtermDuringRefund(t *testing.T, delay time.Duration, env ...string) {
	bin := settleBinary.Path(t)
	ctx := context.Background()
	db, url, token := shopDatabase(t, "test")
	fk, base := shopStripe(t)
	fk.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultSlow, Delay: delay})

	addr := proctest.FreeAddr(t)
	cmd := exec.Command(bin, "serve", "--addr", addr)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "STRIPE_API_KEY=sk_test_shutdown", "STRIPE_API_BASE="+base,
		"SETTLE_RECONCILE_INTERVAL=off", "SETTLE_WORKERS=0", "SETTLE_LOG_LEVEL=info")
	cmd.Env = append(cmd.Env, env...)
	p := proctest.Start(t, "settle serve", cmd)
	out := p.Out
	p.WaitHTTP(t, "http://"+addr+"/healthz", 10*time.Second)

	type result struct {
		status int
		answer refund.Answer
		err    error
	}
	answered := make(chan result, 1)
	go func() {
		body := `{"order_id":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_4417"}`
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/refunds", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- result{err: err}
			return
		}
		defer resp.Body.Close()
		var a refund.Answer
		err = json.NewDecoder(resp.Body).Decode(&a)
		answered <- result{status: resp.StatusCode, answer: a, err: err}
	}()
	// The attempt is recorded before it is sent: then Stripe holds it for delay.
	for i := 0; ; i++ {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM attempts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if i == 200 {
			t.Fatalf("no attempt recorded\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	signalled := time.Now()
	p.Signal(t, syscall.SIGTERM)

	// New connections are refused at once.
	time.Sleep(300 * time.Millisecond)
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("a new request was answered %d after SIGTERM", resp.StatusCode)
	}

	var r result
	select {
	case r = <-answered:
	case <-time.After(delay + 30*time.Second):
		t.Fatalf("no answer %s after SIGTERM\n%s", delay+30*time.Second, out)
	}
	if r.err != nil || r.status != http.StatusOK || r.answer.Status != refund.Refunded || r.answer.RefundID == "" {
		t.Fatalf("the refund in flight was answered %d %+v (%v); want refunded\n%s", r.status, r.answer, r.err, out)
	}
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("settle did not exit 30 s after SIGTERM\n%s", out)
	}
	if code := p.ExitCode(); code != 0 {
		t.Errorf("settle exited %d after SIGTERM, want 0\n%s", code, out)
	}
	if took := time.Since(signalled); took < delay-2*time.Second {
		t.Errorf("settle exited %s after SIGTERM, before Stripe answered", took)
	}
	op, err := db.Get(ctx, r.answer.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusSucceeded || op.LeaseUntil != nil || op.ProviderRef != r.answer.RefundID {
		t.Fatalf("operation %s %s lease %v ref %q; want succeeded with refund %s, lease released", op.ID, op.Status, op.LeaseUntil, op.ProviderRef, r.answer.RefundID)
	}
	if n := len(fk.Refunds()); n != 1 {
		t.Fatalf("%d refunds at Stripe, want 1", n)
	}
}

// Stopping the program while the reaper resends a stalled refund that Stripe answers after
// 3 s: the program waits for the answer, records the refund and only then closes the
// database.
func TestStopFinishesTheReapersResend(t *testing.T) {
	testtool.Heavy(t, "a settle process stopped mid-resend")
	t.Parallel()
	ctx := context.Background()
	db, url := pgtest.NewWithURL(t)
	tenant, err := db.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	fk := fake.NewStripe(fake.StripeOptions{Seed: 1})
	base, err := fk.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fk.Close()
	fk.AddPaymentIntent("pi_4417", 3800, "usd", fake.OwnedBy("shop"))
	// The call's three sends are refused with 429, nothing run; the reaper's is slow.
	fk.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultRateLimit, Calls: []int{1, 2, 3}})
	fk.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultSlow, Delay: 3 * time.Second, Calls: []int{4}})

	// An hour ago the call ran out of sends and released its lease: the operation is stalled.
	hourAgo := ops.NewManualClock(time.Now().Add(-time.Hour))
	tool := &refund.Tool{Ledger: ops.NewLedger(db, hourAgo), Store: db, Deadline: 20 * time.Second,
		Provider: stripe.New(stripe.Config{APIKey: "sk_test_reaper", BaseURL: base}),
		Sleep:    func(context.Context, time.Duration) error { return nil }}
	ans, err := tool.Refund(ctx, refund.Request{TenantID: tenant.ID, Tenant: "shop", OrderID: "4417", AmountCents: 3800,
		Currency: "usd", PaymentIntent: "pi_4417"})
	if err != nil {
		t.Fatal(err)
	}
	if op, err := db.Get(ctx, ans.OperationID); err != nil || op.Status != ops.StatusInProgress || op.Leased(time.Now()) {
		t.Fatalf("after the call: %+v %v; want in progress without a live lease", op, err)
	}

	p := serveWith(t, map[string]string{"DATABASE_URL": url,
		"STRIPE_API_KEY": "sk_test_reaper", "STRIPE_API_BASE": base, "SETTLE_RECONCILE_INTERVAL": "off", "SETTLE_WORKERS": "0"})
	// The reaper's first pass starts at once; its send is recorded before it leaves.
	for i := 0; ; i++ {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM attempts WHERE operation_id = $1`, ans.OperationID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 4 {
			break
		}
		if i == 300 {
			t.Fatalf("the reaper did not resend: %d attempts", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	op, err := db.Get(ctx, ans.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	refunds := fk.Refunds()
	if op.Status != ops.StatusSucceeded || len(refunds) != 1 || op.ProviderRef != refunds[0].ID {
		t.Fatalf("after Close the operation is %s (ref %q), Stripe holds %d refunds; want succeeded with Stripe's one", op.Status, op.ProviderRef, len(refunds))
	}
}

// The shutdown timeout covers a refund call by default, follows the refund deadline, and
// may be set on its own.
func TestShutdownTimeoutSetting(t *testing.T) {
	t.Parallel()
	db := "postgres://u@127.0.0.1:1/x"
	for _, c := range []struct {
		vars map[string]string
		want time.Duration
	}{
		{map[string]string{}, 35 * time.Second},
		{map[string]string{"SETTLE_REFUND_DEADLINE": "50s"}, time.Minute},
		{map[string]string{"SETTLE_SHUTDOWN_TIMEOUT": "2m"}, 2 * time.Minute},
	} {
		c.vars["DATABASE_URL"] = db
		cfg, err := LoadConfig([]string{"serve"}, env(c.vars), t.TempDir())
		if err != nil || cfg.ShutdownTimeout != c.want || NewProgram(cfg, nil).ShutdownTimeout() != c.want {
			t.Errorf("%v: shutdown timeout %s (%v), want %s", c.vars, cfg.ShutdownTimeout, err, c.want)
		}
	}
	code, _, stderr := run(t, []string{"serve"}, map[string]string{"DATABASE_URL": db, "SETTLE_SHUTDOWN_TIMEOUT": "soon"}, "")
	if code != 2 || !strings.Contains(stderr, `SETTLE_SHUTDOWN_TIMEOUT="soon" is not a positive Go duration`) {
		t.Errorf("SETTLE_SHUTDOWN_TIMEOUT=soon: exit %d, stderr %q", code, stderr)
	}
}
