package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/proctest"
	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops/fake"
)

// SIGTERM while the provider generates an LLM call that takes longer than a refund may:
// the shutdown waited only the refund deadline plus 10 s, so the process exited with the
// call already sent, and paid, its answer lost to its client and its operation uncertain,
// for the client's retry to pay for a second generation (ops rule 3). By default the
// shutdown now waits as long as the call may last (SETTLE_LLM_DEADLINE): the client has its
// answer, the operation is recorded succeeded, and settle exits 0.
func TestSigtermFinishesAnLLMCallInFlight(t *testing.T) {
	testtool.Heavy(t, "a settle process stopped with SIGTERM")
	t.Parallel()
	const latency = 14 * time.Second // longer than the refund deadline of 2 s plus 10 s
	f := fake.NewLLM(fake.LLMOptions{Seed: 1, Latency: latency})
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	db, url, token := shopDatabase(t, "test")
	addr := proctest.FreeAddr(t)
	cmd := exec.Command(settleBinary.Path(t), "serve", "--addr", addr)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "SETTLE_LLM_BASE_URL="+base, "SETTLE_LLM_API_KEY=sk-test",
		"SETTLE_STRIPE_TIMEOUT=1s", "SETTLE_REFUND_DEADLINE=2s", "SETTLE_LLM_DEADLINE=30s",
		"SETTLE_RECONCILE_INTERVAL=off", "SETTLE_WORKERS=0", "SETTLE_LOG_LEVEL=info")
	p := proctest.Start(t, "settle serve", cmd)
	p.WaitHTTP(t, "http://"+addr+"/healthz", 10*time.Second)

	answered := make(chan string, 1)
	go func() { answered <- postChat(t, "http://"+addr, token, "sigterm-llm") }()
	ctx := context.Background()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM attempts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no attempt recorded within 5 s\n%s", p.Out)
		}
	}
	p.Signal(t, syscall.SIGTERM)
	var got string
	select {
	case got = <-answered:
	case <-time.After(latency + 30*time.Second):
		t.Fatalf("no answer %s after SIGTERM\n%s", latency+30*time.Second, p.Out)
	}
	if !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"chat.completion"`) {
		t.Fatalf("the LLM call in flight at SIGTERM was answered %.200s; want its completion\n%s", got, p.Out)
	}
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("settle did not exit 30 s after the answer\n%s", p.Out)
	}
	if code := p.ExitCode(); code != 0 {
		t.Errorf("settle exited %d after SIGTERM, want 0\n%s", code, p.Out)
	}
	var status string
	if err := db.Pool.QueryRow(ctx, `SELECT status FROM operations WHERE intent_key = 'sigterm-llm'`).Scan(&status); err != nil || status != "succeeded" {
		t.Errorf("after shutdown the operation is %q (%v); want succeeded", status, err)
	}
}
