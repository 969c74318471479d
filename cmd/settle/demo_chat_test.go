package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settle-dev/settle/internal/demo"
	"github.com/settle-dev/settle/ops/fake"
)

// The demo's chat backend calls every API the gateway serves: chat completions, the
// Responses API, embeddings and Anthropic's Messages API, each settled once through the
// gateway, so the queue, the operation pages and /metrics show all four; its Messages call
// whose stream broke off stays open (in progress until the reaper finds its lease ended and
// leaves it unknown), as nothing can look it up.
func TestDemoChatCallsEveryAPI(t *testing.T) {
	t.Parallel()
	f := fake.NewLLM(fake.LLMOptions{Seed: 1})
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	a := fake.NewAnthropic(fake.AnthropicOptions{Seed: 1})
	abase, err := a.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	p := slowServer(t, 10*time.Second, time.Minute, "SETTLE_LLM_BASE_URL", base, "SETTLE_LLM_API_KEY", "sk-test",
		"SETTLE_ANTHROPIC_BASE_URL", abase, "SETTLE_ANTHROPIC_API_KEY", "sk-ant-test",
		"SETTLE_RECONCILE_INTERVAL", "off", "SETTLE_WORKERS", "0")
	ctx := context.Background()
	tn, token := shopToken(t, p)
	d := demo.NewTraffic(demo.Server{URL: p.URL(), DB: p.DB, Ledger: p.Ledger, Refunds: p.Refunds}, &demo.Fakes{Anthropic: a}, tn, token,
		nil, testLogger(t))
	for n := range 15 {
		route, body, streams := demo.ChatCall(n)
		d.Send(ctx, route, "demo-api-"+string(rune('a'+n)), "chat-1", body, streams && n%2 == 0)
	}
	route, body := demo.MessagesCall(1)
	d.Send(ctx, route, "demo-message-1", "chat-1", body, true)
	d.UnknownMessage(ctx)
	// A call's close is written after its client has the answer (the architecture's "an LLM
	// answer goes out before its close is written"), so the calls are read until every
	// answered one has closed, or for 10 s.
	var got map[string]int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got = demoCalls(t, p.DB.Pool, tn.ID)
		if got["/v1/messages in_progress"]+got["/v1/messages unknown"] <= 1 || time.Now().After(deadline) {
			break
		}
	}
	if got["/v1/messages in_progress"]+got["/v1/messages unknown"] != 1 {
		t.Errorf("the broken Messages stream is not the one open call; the demo's calls ended as %v", got)
	}
	for _, want := range []string{"/v1/chat/completions succeeded", "/v1/responses succeeded", "/v1/embeddings succeeded",
		"/v1/messages succeeded"} {
		if got[want] == 0 {
			t.Errorf("no %s call; the demo's calls ended as %v", want, got)
		}
	}
	for _, api := range []fake.LLMAPI{fake.APIChatCompletions, fake.APIResponses, fake.APIEmbeddings} {
		if len(f.GenerationsOf(api)) == 0 {
			t.Errorf("the provider generated nothing for %s", api)
		}
	}
}

// demoCalls counts the tenant's gateway calls by route and status.
func demoCalls(t *testing.T, pool *pgxpool.Pool, tenantID int64) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT coalesce(request->>'route', ''), status, count(*) FROM operations
		WHERE tenant_id = $1 AND kind = 'llm_call' GROUP BY 1, 2`, tenantID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var route, status string
		var n int
		if err := rows.Scan(&route, &status, &n); err != nil {
			t.Fatal(err)
		}
		got[route+" "+status] += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
