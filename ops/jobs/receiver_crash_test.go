package jobs_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/proctest"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
)

// The environment of the sample receiver's process (TestSampleReceiverProcess).
const (
	receiverDBEnv    = "SETTLE_SAMPLE_RECEIVER_DB"
	receiverAddrEnv  = "SETTLE_SAMPLE_RECEIVER_ADDR"
	receiverCrashEnv = "SETTLE_SAMPLE_RECEIVER_CRASH"
	// receiptWritten is what the process prints when its receipt is written and the inbox's
	// transaction is not committed yet; with receiverCrashEnv it then waits to be killed.
	receiptWritten = "receipt written, inbox not committed"
	listening      = "receiver listening"
)

// TestSampleReceiverProcess is not a test: it is the sample receiver as a process of its own,
// which TestReceiverKilledBetweenItsTwoWritesAppliesOnce starts by running this test binary
// again. Without its environment it does nothing.
func TestSampleReceiverProcess(t *testing.T) {
	url, addr := os.Getenv(receiverDBEnv), os.Getenv(receiverAddrEnv)
	if url == "" || addr == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	db, err := pg.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var between func()
	if os.Getenv(receiverCrashEnv) != "" {
		between = func() {
			fmt.Println(receiptWritten)
			<-ctx.Done() // SIGKILL ends the process here
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: sampleConsumer(db, between).Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Println(listening)
	_ = srv.Serve(l)
}

// startReceiverProcess runs the sample receiver as a real process on addr and waits until it
// listens.
func startReceiverProcess(t *testing.T, url, addr string, crash bool) *proctest.Proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{receiverDBEnv + "=" + url, receiverAddrEnv + "=" + addr}
	if crash {
		env = append(env, receiverCrashEnv+"=1")
	}
	cmd := exec.Command(exe, "-test.run=^TestSampleReceiverProcess$")
	cmd.Env = append(os.Environ(), env...)
	p := proctest.Start(t, "sample receiver", cmd)
	p.WaitOutput(t, listening, 60*time.Second)
	return p
}

// The sample receiver writes its receipt, and the process is killed with SIGKILL before the
// inbox row commits: neither is left, the relay delivers the event again to the restarted
// receiver, which applies it once, and a further redelivery applies nothing.
func TestReceiverKilledBetweenItsTwoWritesAppliesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	j := e.submit(t, e.tenant, "killed-receiver", docA, "v1")
	e.drain(t, e.worker("w1", false))
	if _, err := e.db.Pool.Exec(ctx, receiptsTable); err != nil {
		t.Fatal(err)
	}
	addr := proctest.FreeAddr(t)
	clock := ops.NewManualClock(time.Now())
	relay := &outbox.Relay{Store: pg.JobOutbox{DB: e.db}, Publisher: jobs.NewWebhooks([]string{"http://" + addr}, nil), Clock: clock}

	p := startReceiverProcess(t, e.world.DatabaseURL, addr, true)
	delivered := make(chan int, 1)
	go func() {
		n, _ := relay.RunOnce(ctx)
		delivered <- n
	}()
	p.WaitOutput(t, receiptWritten, 30*time.Second)
	p.Kill(t)
	if n := <-delivered; n != 0 {
		t.Fatalf("the relay counted %d deliveries to a receiver that died", n)
	}
	receipts := func() int {
		return e.count(t, `SELECT count(*) FROM sample_receipts WHERE job_id = $1`, j.ID)
	}
	inbox := func() int {
		return e.count(t, `SELECT count(*) FROM consumed_events WHERE consumer = 'sample' AND entity_id = $1`, j.ID)
	}
	if r, i := receipts(), inbox(); r != 0 || i != 0 {
		t.Fatalf("after the kill: %d receipts, %d inbox rows; want neither", r, i)
	}

	startReceiverProcess(t, e.world.DatabaseURL, addr, false)
	clock.Advance(time.Minute) // past the failed delivery's backoff
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("redelivery: %d %v", n, err)
	}
	// The relay died after the receiver answered: the event comes once more.
	if _, err := e.db.Pool.Exec(ctx, `UPDATE job_outbox SET published_at = NULL, locked_until = NULL`); err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("second redelivery: %d %v", n, err)
	}
	if r, i := receipts(), inbox(); r != 1 || i != 1 {
		t.Fatalf("%d receipts, %d inbox rows; want the event applied once", r, i)
	}
}
