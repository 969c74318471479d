package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops/fake"
)

// A server that runs job workers with SETTLE_JOB_WEBHOOK_URL registers its receivers as the
// consumer of every tenant's job events; started again without it, nobody delivers them any
// more, so the registration goes, and with it the events still waiting: each holds its
// job's result, which would otherwise stay for good (ops rule 10: an event nobody receives
// is not written, and a receiver added later gets no event of earlier jobs). Delivered
// events are the retention's.
func TestRemovingTheJobWebhookURLStopsWritingJobEvents(t *testing.T) {
	t.Parallel()
	w := testworld.New(t)
	_, base := w.LLM(fake.LLMOptions{Seed: 7})
	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer receiver.Close()
	ctx := context.Background()
	serve := func(webhookURL string) {
		t.Helper()
		vars := map[string]string{"DATABASE_URL": w.DatabaseURL, "SETTLE_RECONCILE_INTERVAL": "off",
			"SETTLE_LLM_BASE_URL": base, "SETTLE_LLM_API_KEY": "sk-serve", "SETTLE_WORKERS": "1"}
		if webhookURL != "" {
			vars["SETTLE_JOB_WEBHOOK_URL"] = webhookURL
		}
		cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0"}, env(vars), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		p := NewProgram(cfg, testLogger(t))
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		if err := p.Run(runCtx); err != nil {
			t.Fatal(err)
		}
		stop()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := w.DB.Pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	serve(receiver.URL)
	if n := count(`SELECT count(*) FROM job_event_consumers`); n != 1 {
		t.Fatalf("%d job event consumers with receivers configured, want 1", n)
	}
	// One event was delivered, one still waits for the receivers.
	if _, err := w.DB.Pool.Exec(ctx, `INSERT INTO job_outbox (event_id, topic, entity_id, payload, created_at, published_at)
VALUES (gen_random_uuid(), 'job.published', gen_random_uuid()::text, '{"result": {"summary": "delivered"}}', now(), now()),
       (gen_random_uuid(), 'job.published', gen_random_uuid()::text, '{"result": {"summary": "waiting"}}', now(), NULL)`); err != nil {
		t.Fatal(err)
	}
	serve("")
	if n := count(`SELECT count(*) FROM job_event_consumers`); n != 0 {
		t.Fatalf("%d job event consumers left after the receivers were removed from the configuration, want none", n)
	}
	if n := count(`SELECT count(*) FROM job_outbox WHERE published_at IS NULL`); n != 0 {
		t.Fatalf("%d undelivered job events kept with no receiver, want none", n)
	}
	if n := count(`SELECT count(*) FROM job_outbox WHERE published_at IS NOT NULL`); n != 1 {
		t.Fatalf("%d delivered job events, want the 1 the retention deletes", n)
	}
}
