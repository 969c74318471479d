package anthropic_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/anthropic"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/recon"
)

// TestUsageReaderReadsTheMessagesUsageReport: the reader asks the Admin API's Messages usage
// report with the admin key for one-minute buckets grouped by model and API key, follows
// next_page to the end of the window, and gives each bucket, key and model its prompt tokens
// whichever part the cache served (uncached, written, read) and its output tokens. Asked
// for one key's id, it keeps that key's usage only. A message key cannot read the report,
// and the report has no five-minute buckets.
func TestUsageReaderReadsTheMessagesUsageReport(t *testing.T) {
	t.Parallel()
	clock := ops.NewManualClock(time.Date(2026, 3, 2, 9, 0, 30, 0, time.UTC))
	const admin = "sk-ant-admin01-test"
	f := fake.NewAnthropic(fake.AnthropicOptions{Clock: clock.Now, Words: 6, AdminKey: admin})
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	send := func(key, body string) {
		t.Helper()
		c, err := anthropic.New(anthropic.Config{BaseURL: base, APIKey: key, AttemptTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if r := c.Send(context.Background(), llm.Call{Body: []byte(body)}); r.Outcome != ops.OutcomeOK {
			t.Fatalf("send: %+v", r)
		}
	}
	// The same cached prompt twice (written, then read), another model, another key; then,
	// a day later, one more message, on the report's second page.
	cached := `{"model":"claude-sonnet-4-5","max_tokens":64,"system":[{"type":"text","text":"` + strings.Repeat("You answer customers. ", 40) +
		`","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"where is order 4417?"}]}`
	send(apiKey, cached)
	send(apiKey, cached)
	send(apiKey, body)
	send("sk-ant-api03-someone-else", body)
	start := clock.Now().Truncate(time.Minute)
	clock.Advance(25 * time.Hour)
	send(apiKey, strings.Replace(body, "claude-sonnet-4-5", "claude-haiku-4-5", 1))
	clock.Advance(time.Minute)
	gens := f.Generations()
	if gens[0].CacheCreationInputTokens == 0 || gens[1].CacheReadInputTokens == 0 {
		t.Fatalf("the prompt cache was not used: %+v", gens[:2])
	}
	prompt := func(g fake.AnthropicGeneration) int64 {
		return int64(g.InputTokens + g.CacheCreationInputTokens + g.CacheReadInputTokens)
	}
	w := recon.Window{From: start, To: clock.Now().Truncate(time.Minute)}

	u := &anthropic.UsageReader{BaseURL: base, AdminKey: admin}
	if u.Name() != "anthropic" || u.PromptBuckets() != time.Minute {
		t.Fatalf("name %q, buckets %s", u.Name(), u.PromptBuckets())
	}
	rows, err := u.Usage(context.Background(), w, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	mine, other := fake.AnthropicKeyID(apiKey), fake.AnthropicKeyID("sk-ant-api03-someone-else")
	got := map[string]recon.UsageRow{}
	for _, r := range rows {
		got[r.Start.Format("15:04")+" "+r.APIKeyID+" "+r.Model] = r
	}
	pages := 0
	for _, r := range f.Requests() {
		if r.Path == anthropic.UsagePath {
			pages++
		}
	}
	if len(rows) != 3 || pages != 2 {
		t.Fatalf("%d pages, rows %+v", pages, rows)
	}
	sonnet, alone := got["09:00 "+mine+" claude-sonnet-4-5"], got["09:00 "+other+" claude-sonnet-4-5"]
	haiku := got["10:00 "+mine+" claude-haiku-4-5"]
	if sonnet.InputTokens != prompt(gens[0])+prompt(gens[1])+prompt(gens[2]) || prompt(gens[0]) != prompt(gens[1]) ||
		sonnet.OutputTokens != int64(gens[0].OutputTokens+gens[1].OutputTokens+gens[2].OutputTokens) || sonnet.Requests != 0 ||
		sonnet.Width != time.Minute || alone.InputTokens != prompt(gens[3]) || haiku.InputTokens != prompt(gens[4]) {
		t.Fatalf("rows %+v", got)
	}
	// Only Settle's key.
	u.APIKeyIDs = []string{mine}
	if rows, err = u.Usage(context.Background(), w, time.Minute); err != nil || len(rows) != 2 {
		t.Fatalf("one key's rows %+v, %v", rows, err)
	}
	refused := &anthropic.UsageReader{BaseURL: base, AdminKey: apiKey}
	if _, err := refused.Usage(context.Background(), w, time.Minute); ops.ErrorCode(err) != ops.EUNAVAILABLE || !strings.Contains(ops.ErrorMessage(err), "Admin API") {
		t.Fatalf("a message key reading the report: %v", err)
	}
	if _, err := u.Usage(context.Background(), w, 5*time.Minute); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("five-minute buckets: %v", err)
	}
}
