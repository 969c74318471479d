package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/proctest"
	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
)

// TestASeparateWorkerExportsItsMetrics is the attack of a deployment that scales its job
// workers apart from 'settle serve': a 'settle worker' process served no /metrics, so the
// jobs it ran, the tenants' LLM budgets it held jobs back for (an outage of that tenant's
// pipeline until midnight UTC) and its Go runtime were exported nowhere. With
// SETTLE_WORKER_METRICS_ADDR a real worker process answers /healthz, /readyz and /metrics
// there: a job it published is counted, and so is a job it held back for its tenant's spent
// budget, under caller="job", once; with SETTLE_METRICS_TOKEN, /metrics answers its bearer
// alone. SIGTERM stops the listener with the process, which exits 0.
// ops rule 8
func TestASeparateWorkerExportsItsMetrics(t *testing.T) {
	testtool.Heavy(t, "settle worker processes stopped with SIGTERM")
	t.Parallel()
	ctx := context.Background()
	w := testworld.New(t)
	_, base := w.LLM(fake.LLMOptions{Seed: 11})
	w.Tenant("capped")
	// A dollar a day pays for the first job's generation (a call is admitted only while its
	// worst case fits what is left); the budget is then lowered to what it cost, as an admin
	// may, and the next job waits.
	if _, err := w.DB.SetLLMBudget(ctx, "capped", 1_000_000, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	submit := func(key, text string) {
		t.Helper()
		ten := w.Tenant("capped")
		if _, err := w.Jobs().Submit(ctx, jobs.Submission{TenantID: ten.ID, IdempotencyKey: key, Document: jobs.Document{Text: text},
			Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast", LLMBudgetMicros: ten.LLMBudgetMicros}); err != nil {
			t.Fatal(err)
		}
	}
	start := func(env ...string) (*proctest.Proc, string) {
		t.Helper()
		addr := proctest.FreeAddr(t)
		cmd := exec.Command(settleBinary.Path(t), "worker")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+w.DatabaseURL, "SETTLE_LLM_BASE_URL="+base, "SETTLE_LLM_API_KEY=sk-worker",
			"SETTLE_WORKERS=1", "SETTLE_WORKER_METRICS_ADDR="+addr, "SETTLE_LOG_LEVEL=info")
		cmd.Env = append(cmd.Env, env...)
		p := proctest.Start(t, "settle worker", cmd)
		p.WaitHTTP(t, "http://"+addr+"/healthz", 15*time.Second)
		return p, "http://" + addr
	}
	stop := func(p *proctest.Proc, url string) {
		t.Helper()
		p.Signal(t, syscall.SIGTERM)
		p.Wait(t, 30*time.Second)
		if code := p.ExitCode(); code != 0 {
			t.Fatalf("settle worker exited %d after SIGTERM\n%s", code, p.Out)
		}
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			t.Fatalf("the worker's listener still answers after it exited")
		}
	}

	submit("first", "The first note of the day.")
	p, url := start()
	for _, probe := range []string{"/healthz", "/readyz"} {
		if code, body := scrape(t, url+probe); code != http.StatusOK || body != "ok" {
			t.Fatalf("GET %s: %d %q", probe, code, body)
		}
	}
	published := `settle_jobs_run_total{outcome="published"} 1`
	p.WaitUntil(t, "counting the published job", 20*time.Second, func() bool {
		_, body := scrape(t, url+"/metrics")
		return strings.Contains(body, published)
	})
	_, body := scrape(t, url+"/metrics")
	for _, want := range []string{"go_goroutines ", "process_resident_memory_bytes ", "settle_clock_skew_seconds "} {
		if !strings.Contains(body, want) {
			t.Errorf("the worker's /metrics has no %s", want)
		}
	}
	stop(p, url)
	var spent int64
	if err := w.DB.Pool.QueryRow(ctx, `SELECT greatest(coalesce(sum(cost_micros), 0), 1) FROM operations WHERE tenant_id = $1`,
		w.Tenant("capped").ID).Scan(&spent); err != nil {
		t.Fatal(err)
	}
	// The next job is submitted while the dollar still stands (submission refuses a job no
	// day's budget pays), and the budget is lowered under it: a new process reads the
	// tenant's spend afresh, and the job waits for midnight. With SETTLE_METRICS_TOKEN,
	// /metrics answers its bearer alone; the probes stay open.
	submit("second", "The second note, past the budget.")
	if _, err := w.DB.SetLLMBudget(ctx, "capped", spent, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	const token = "worker-metrics-token-0123456789"
	p, url = start("SETTLE_METRICS_TOKEN=" + token)
	if code, _ := scrape(t, url+"/metrics"); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token answered %d, want 401", code)
	}
	if code, _ := scrape(t, url+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz answered %d with a metrics token set", code)
	}
	refused := `settle_llm_budget_refused_total{api="chat_completions",caller="job",tenant="capped"} 1`
	p.WaitUntil(t, "counting the job its budget held back", 20*time.Second, func() bool {
		_, body := scrape(t, url+"/metrics", token)
		return strings.Contains(body, refused) && strings.Contains(body, `settle_jobs_run_total{outcome="queued"} 1`)
	})
	stop(p, url)
}

// TestAWorkerRefusesABadMetricsAddress: a SETTLE_WORKER_METRICS_ADDR that is no host:port
// is refused in one line with exit 2, before the database is touched.
func TestAWorkerRefusesABadMetricsAddress(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"9091", "localhost", "127.0.0.1:http", "127.0.0.1:70000"} {
		args := []string{"worker"}
		vars := map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:1/x", "SETTLE_LLM_BASE_URL": "http://127.0.0.1:1/v1",
			"SETTLE_WORKER_METRICS_ADDR": bad}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var stdout, stderr bytes.Buffer
		code := Main(ctx, args, envList(vars), strings.NewReader(""), &stdout, &stderr)
		cancel()
		refusedInOneLine(t, args, code, stdout.String(), stderr.String(), "SETTLE_WORKER_METRICS_ADDR")
	}
}

// scrape GETs url, with the bearer token when one is given, and returns its status and body.
func scrape(t *testing.T, url string, token ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range token {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
