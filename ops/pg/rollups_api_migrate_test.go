package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestRollupsAPIMigrationGivesEveryRowOneAPI: migration 00048 gives every LLM operation the
// API its stored request names (a job's generation, a call that names none and a purged one
// are chat completions), and every rollup row computed before it one API whole: the one
// every llm_call of its tenant and provider created in its hour called, chat completions for
// a job's rows and where that hour's calls called several or none is left, none for a refund
// or a refused request. The rows of one hour take one API at every width, so each level still
// adds up to the one below it; and going down again adds the rows of one group back into one.
func TestRollupsAPIMigrationGivesEveryRowOneAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if err := f.db.MigrateDownTo(ctx, 47); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := f.db.Pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	h1 := time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC) // responses only
	h2 := h1.Add(time.Hour)                            // responses and messages
	h3 := h2.Add(time.Hour)                            // no operation left
	seed := func(kind, provider, request string, at time.Time) string {
		t.Helper()
		id := uuid.NewString()
		exec(`INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, request, created_at, updated_at)
			VALUES ($1::text::uuid, $2, $3, $4, 'i-' || $1::text, 'k-' || $1::text, 'fp', 'unknown', NULLIF($5::text, '')::jsonb, $6, $6)`,
			id, f.tenant, kind, provider, request, at)
		return id
	}
	wantOp := map[string]string{
		seed("llm_call", "openai", `{"route":"/v1/responses","body":{}}`, h1.Add(time.Minute)):         "responses",
		seed("llm_call", "openai", `{"route":"/v1/responses","body":{}}`, h2.Add(time.Minute)):         "responses",
		seed("llm_call", "openai", `{"route":"/v1/messages","body":{}}`, h2.Add(40*time.Minute)):       "messages",
		seed("llm_call", "openai", `{"route":"/v1/embeddings","body":{}}`, h1.Add(-2*time.Hour)):       "embeddings",
		seed("llm_call", "openai", `{"policy":"batch","body":{}}`, h1.Add(-2*time.Hour)):               "chat_completions",
		seed("llm_call", "openai", "", h1.Add(-2*time.Hour)):                                           "chat_completions",
		seed("llm_job", "openai", `{"document_hash":"h","pipeline":"p"}`, h1.Add(-2*time.Hour)):        "chat_completions",
		seed("refund", "stripe", "", h1.Add(-2*time.Hour)):                                             "",
		seed("llm_call", "openai", `{"route":"/v1/chat/completions","body":{}}`, h1.Add(-3*time.Hour)): "chat_completions",
	}
	// The rollups of three hours at every width, and money beside each.
	type group struct {
		kind, provider string
		at             time.Time
	}
	groups := map[group]string{
		{"llm_call", "openai", h1}: "responses",
		{"llm_call", "openai", h2}: "chat_completions",
		{"llm_call", "openai", h3}: "chat_completions",
		{"llm_job", "openai", h1}:  "chat_completions",
		{"refund", "stripe", h1}:   "",
		{"llm_call", "", h1}:       "",
	}
	for g := range groups {
		for _, w := range []struct {
			secs int
			at   time.Time
			n    int
		}{{60, g.at.Add(5 * time.Minute), 2}, {60, g.at.Add(50 * time.Minute), 3}, {900, g.at, 2}, {900, g.at.Add(45 * time.Minute), 3}, {3600, g.at, 5}} {
			exec(`INSERT INTO rollups (width_seconds, start, tenant_id, kind, provider, client_requests, computed_at) VALUES ($1, $2, $3, $4, $5, $6, now())`,
				w.secs, w.at, f.tenant, g.kind, g.provider, w.n)
			exec(`INSERT INTO rollup_money (width_seconds, start, tenant_id, kind, provider, measure, currency, micros) VALUES ($1, $2, $3, $4, $5, 'saved', 'usd', $6)`,
				w.secs, w.at, f.tenant, g.kind, g.provider, w.n*100)
		}
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range wantOp {
		var api string
		if err := f.db.Pool.QueryRow(ctx, `SELECT api FROM operations WHERE id = $1`, id).Scan(&api); err != nil || api != want {
			t.Errorf("operation %s: API %q (%v), want %q", id, api, err, want)
		}
	}
	for g, want := range groups {
		var n, rows, money int
		if err := f.db.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(client_requests), 0),
			(SELECT coalesce(sum(micros), 0) FROM rollup_money m WHERE m.tenant_id = $1 AND m.kind = $2 AND m.provider = $3
				AND m.start >= $4 AND m.start < $4 + interval '1 hour' AND m.api = $5)
			FROM rollups WHERE tenant_id = $1 AND kind = $2 AND provider = $3 AND start >= $4 AND start < $4 + interval '1 hour' AND api = $5`,
			f.tenant, g.kind, g.provider, g.at, want).Scan(&rows, &n, &money); err != nil {
			t.Fatal(err)
		}
		if rows != 5 || n != 15 || money != 1500 {
			t.Errorf("%+v: %d rows with API %q holding %d requests and %d micros, want all 5 rows, 15 and 1500", g, rows, want, n, money)
		}
	}

	// Down again: one row per group, as before, whatever its API.
	exec(`INSERT INTO rollups (width_seconds, start, tenant_id, kind, provider, api, client_requests, computed_at)
		VALUES (60, $1, $2, 'llm_call', 'openai', 'messages', 4, now())`, h2.Add(5*time.Minute), f.tenant)
	if err := f.db.MigrateDownTo(ctx, 47); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := f.db.Pool.QueryRow(ctx, `SELECT client_requests FROM rollups WHERE width_seconds = 60 AND start = $1 AND kind = 'llm_call' AND provider = 'openai'`,
		h2.Add(5*time.Minute)).Scan(&n); err != nil || n != 6 {
		t.Errorf("down: the minute's two rows add up to %d (%v), want 6", n, err)
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}
