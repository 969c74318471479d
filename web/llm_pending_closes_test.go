package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	upstream "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg"
)

// closeGate is the database with a gate before the close of a succeeded attempt, as a
// database that falls behind would hold it; it holds no row meanwhile.
type closeGate struct {
	*pg.DB
	gate chan struct{}
}

func (s *closeGate) Transition(ctx context.Context, p ops.TransitionParams) (*ops.Operation, error) {
	if p.Finish != nil && p.To == ops.StatusSucceeded {
		<-s.gate
	}
	return s.DB.Transition(ctx, p)
}

// TestMetricsShowLLMClosesPendingAfterTheirAnswer: a client answered before its call's
// close is written leaves a close behind it that nothing showed; /metrics has
// settle_llm_pending_closes, one gauge for the process and no tenant label, that counts it
// while the database holds it and falls back to 0 once it is written (ops rule 8: every
// client request is recorded with its answer, and an operator can see how many are not yet).
func TestMetricsShowLLMClosesPendingAfterTheirAnswer(t *testing.T) {
	s, tw := newServer(t)
	_, base := tw.LLM(fake.LLMOptions{Seed: 1})
	up := tw.Upstream(base, upstream.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"})
	store := &closeGate{DB: tw.DB, gate: make(chan struct{})}
	gw, err := llm.New(llm.Config{Ledger: testworld.RegisterKinds(ops.NewLedger(store, ops.NewManualClock(time.Now()))),
		Upstream: up, Prices: llm.DefaultPrices(), Refs: tw.DB, Streams: tw.DB})
	if err != nil {
		t.Fatal(err)
	}
	s.LLM = gw
	w := &llmWorld{world: tw, db: tw.DB, url: tw.Serve(s.Handler()), tokens: map[string]string{"shop": tw.Token(tw.Tenant("shop"), "test")}}
	gauge := func() string {
		resp, err := http.Get(w.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "settle_llm_pending_closes "); ok {
				return v
			}
		}
		t.Fatalf("/metrics has no settle_llm_pending_closes gauge:\n%s", b)
		return ""
	}
	if v := gauge(); v != "0" {
		t.Fatalf("settle_llm_pending_closes = %s before any call, want 0", v)
	}
	for _, key := range []string{"pending-1", "pending-2"} {
		if resp := w.post(t, "shop", key, chatBody("answer now, close later", 0, false)); resp.StatusCode != http.StatusOK {
			t.Fatalf("the call answered %d", resp.StatusCode)
		}
	}
	if v := gauge(); v != "2" {
		t.Fatalf("settle_llm_pending_closes = %s with two closes held, want 2", v)
	}
	close(store.gate)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gw.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if v := gauge(); v != "0" {
		t.Fatalf("settle_llm_pending_closes = %s once the closes are written, want 0", v)
	}
	w.waitStatus(t, "pending-2", ops.StatusSucceeded)
}
