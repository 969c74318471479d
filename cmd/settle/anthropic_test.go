package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestServeWiresAnthropicMessages: with SETTLE_ANTHROPIC_BASE_URL alone, serve answers
// POST /v1/messages through Anthropic with SETTLE_ANTHROPIC_API_KEY, and has no provider for
// OpenAI's routes; without it, /v1/messages is not served.
func TestServeWiresAnthropicMessages(t *testing.T) {
	t.Parallel()
	a := fake.NewAnthropic(fake.AnthropicOptions{})
	base, err := a.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	db := pgtest.URL(pgtest.NewDatabase(t))
	for _, anthropicBase := range []string{base, ""} {
		cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0", "--migrate"}, env(map[string]string{"DATABASE_URL": db,
			"SETTLE_ANTHROPIC_BASE_URL": anthropicBase, "SETTLE_ANTHROPIC_API_KEY": "sk-ant-api03-serve"}), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		p := NewProgram(cfg, testLogger(t))
		if err := p.Run(ctx); err != nil {
			t.Fatal(err)
		}
		_, token := shopToken(t, p)
		post := func(path, body string) (int, string) {
			req, _ := http.NewRequest(http.MethodPost, p.URL()+path, strings.NewReader(body))
			req.Header.Set("x-api-key", token)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "serve-"+anthropicBase)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		code, body := post("/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
		chat, _ := post("/v1/chat/completions", `{"model":"fake-small","messages":[{"role":"user","content":"hi"}]}`)
		p.Close()
		gens := a.Generations()
		switch {
		case anthropicBase != "" && (code != http.StatusOK || len(gens) != 1 || gens[0].APIKeyID != fake.AnthropicKeyID("sk-ant-api03-serve") || chat != http.StatusNotFound):
			t.Fatalf("with Anthropic: messages %d %s, chat completions %d; Anthropic billed %+v", code, body, chat, gens)
		case anthropicBase == "" && (code != http.StatusNotFound || !strings.Contains(body, `"type":"not_found_error"`) || len(gens) != 1):
			t.Fatalf("without Anthropic: messages %d %s", code, body)
		}
	}
}
