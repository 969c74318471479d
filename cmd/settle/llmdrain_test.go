package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settle-dev/settle/ops/fake"
)

// An LLM call whose client had its answer before the close was written: shutting the
// server down waits for that close before the database closes, so the operation is
// recorded succeeded and its client request answered (ops rules 8, 9). The close is held
// by a lock on the operation's row that the test takes while the provider generates.
func TestShutdownWritesTheCloseOfAnAnsweredLLMCall(t *testing.T) {
	t.Parallel()
	f := fake.NewLLM(fake.LLMOptions{Seed: 1, Latency: 500 * time.Millisecond})
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p := slowServer(t, 10*time.Second, time.Minute, "SETTLE_LLM_BASE_URL", base, "SETTLE_LLM_API_KEY", "sk-test",
		"SETTLE_RECONCILE_INTERVAL", "off", "SETTLE_WORKERS", "0")
	_, token := shopToken(t, p)
	ctx := context.Background()
	// The test's own pool: the server's closes with it.
	own, err := pgxpool.New(ctx, p.Config.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	answered := make(chan string, 1)
	go func() { answered <- postChat(t, p.URL(), token, "drain-1") }()
	var id string
	for deadline := time.Now().Add(5 * time.Second); id == ""; time.Sleep(5 * time.Millisecond) {
		_ = own.QueryRow(ctx, `SELECT id::text FROM operations WHERE intent_key = 'drain-1'`).Scan(&id)
		if time.Now().After(deadline) {
			t.Fatal("no operation opened within 5 s")
		}
	}
	tx, err := own.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM operations WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-answered:
		if !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"chat.completion"`) {
			t.Fatalf("the client was answered %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client had no answer while the close was held")
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("shutdown ended (%v) while a close was pending", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown did not end 10 s after the close was let go")
	}
	var status string
	var answered2 int
	if err := own.QueryRow(ctx, `SELECT o.status, (SELECT count(*) FROM client_requests c WHERE c.operation_id = o.id AND c.answer = 'new' AND c.answered_at IS NOT NULL)
		FROM operations o WHERE o.id = $1`, id).Scan(&status, &answered2); err != nil || status != "succeeded" || answered2 != 1 {
		t.Fatalf("after shutdown the operation is %s with %d client requests answered (%v); want succeeded, 1", status, answered2, err)
	}
}

// postChat posts one chat completion with key to the server at url and returns its status
// and body, "error: ..." when it got none.
func postChat(t *testing.T, url, token, key string) string {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(`{"model":"fake-small","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Status + " " + string(b)
}
