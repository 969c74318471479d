package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/pg/jobstore"
)

func TestJobsSettingsAreChecked(t *testing.T) {
	t.Parallel()
	for _, bad := range []map[string]string{
		{"SETTLE_WORKERS": "-1"},
		{"SETTLE_JOB_WEBHOOK_URL": "ftp://x"},
		{"SETTLE_JOB_LEASE": "soon"},
		{"SETTLE_JOB_RETRY_UNCERTAIN": "maybe"},
		{"SETTLE_JOB_MAX_COST_MICROS": "-5"},
	} {
		if _, err := loadJobsEnv(func(k string) string { return bad[k] }); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	c, err := loadJobsEnv(func(k string) string {
		return map[string]string{"SETTLE_JOB_WEBHOOK_URL": "http://127.0.0.1:1/a, http://127.0.0.1:1/b"}[k]
	})
	if err != nil || c.Workers != 2 || len(c.WebhookURLs) != 2 || c.Lease != jobs.DefaultLease || c.RetryUncertain {
		t.Fatalf("%+v %v", c, err)
	}
}

// TestWorkerCommandPublishesJobs runs 'settle worker' in process against real Postgres and
// the fake LLM: a submitted job is generated, published and delivered to the webhook, and
// the command returns when its context ends.
func TestWorkerCommandPublishesJobs(t *testing.T) {
	ctx := context.Background()
	w := testworld.New(t)
	db := w.DB
	_, base := w.LLM(fake.LLMOptions{Seed: 5})
	var delivered atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		delivered.Add(1)
	}))
	defer hook.Close()
	t.Setenv("SETTLE_JOB_WEBHOOK_URL", hook.URL)
	t.Setenv("SETTLE_JOB_LEASE", "2s")

	ten := w.Tenant("cli")
	s, err := w.Jobs().Submit(ctx, jobs.Submission{TenantID: ten.ID, IdempotencyKey: "cli-1", Document: jobs.Document{Text: "A short note."},
		Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	jc, err := loadJobsEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Command: "worker", DatabaseURL: w.DatabaseURL, WorkerID: "test", Jobs: jc,
		LLM: LLMConfig{BaseURL: base, APIKey: "sk-cli", AttemptTimeout: time.Second}}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- workerCmd(wctx, cfg, slog.New(slog.DiscardHandler)) }()
	deadline := time.Now().Add(15 * time.Second)
	for delivered.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	j, err := jobstore.New(db).GetJob(ctx, ten.ID, s.Job.ID)
	if err != nil || j.Status != jobs.StatusPublished || delivered.Load() != 1 {
		t.Fatalf("job %v %v, %d deliveries", j, err, delivered.Load())
	}
}

// TestJobWorkersInsideServe starts workers as services of a running program, as serve does,
// and submits through the program's job service: the job is published, and Close stops the
// workers.
func TestJobWorkersInsideServe(t *testing.T) {
	t.Parallel()
	w := testworld.New(t)
	fl, base := w.LLM(fake.LLMOptions{Seed: 6})
	cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0"}, env(map[string]string{
		"DATABASE_URL": w.DatabaseURL, "SETTLE_LLM_BASE_URL": base, "SETTLE_LLM_API_KEY": "sk-serve",
		"SETTLE_RECONCILE_INTERVAL": "off"}), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := NewProgram(cfg, testLogger(t))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.startJobWorkers(ctx, 2)
	ten, err := p.DB.EnsureTenant(ctx, "serve")
	if err != nil {
		t.Fatal(err)
	}
	svc := p.jobService()
	in := jobs.Submission{TenantID: ten.ID, IdempotencyKey: "serve-1", Document: jobs.Document{Text: "Serve runs the workers."},
		Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast"}
	s, err := svc.Submit(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var j *jobs.Job
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if j, err = jobstore.New(p.DB).GetJob(ctx, ten.ID, s.Job.ID); err == nil && j.Status == jobs.StatusPublished {
			break
		}
	}
	if j == nil || j.Status != jobs.StatusPublished {
		t.Fatalf("job not published: %+v %v", j, err)
	}
	// A new key for the same input is answered from the stored generation: at submission,
	// or, when one of the running workers claimed the new job first, by that worker; never
	// by a second generation.
	in.IdempotencyKey = "serve-2"
	s2, err := svc.Submit(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	j2 := s2.Job
	for deadline := time.Now().Add(15 * time.Second); j2.Status != jobs.StatusPublished && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if j2, err = jobstore.New(p.DB).GetJob(ctx, ten.ID, s2.Job.ID); err != nil {
			t.Fatal(err)
		}
	}
	if j2.Status != jobs.StatusPublished || len(fl.Generations()) != 1 {
		t.Fatalf("reuse: %+v, %d generations", j2, len(fl.Generations()))
	}
	stop()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
