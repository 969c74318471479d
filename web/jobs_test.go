package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/web"
)

// jobsEnv is the jobs API wired for real: Postgres, a worker, the OpenAI adapter and the
// fake LLM on loopback.
type jobsEnv struct {
	db     *pg.DB
	url    string
	token  string
	worker *jobs.Worker
	fake   *fake.LLM
}

func newJobsEnv(t *testing.T) *jobsEnv {
	t.Helper()
	s, tw := newServer(t)
	fl, base := tw.LLM(fake.LLMOptions{Seed: 2})
	up := tw.Upstream(base, openai.Config{APIKey: "sk-web", AttemptTimeout: 2 * time.Second})
	w := tw.JobWorker(up, "web-test", 2*time.Second, false)
	svc := tw.Jobs()
	svc.Reuse = w
	s.JobsDeps = web.JobsDeps{Jobs: svc}
	return &jobsEnv{db: tw.DB, url: tw.Serve(s.Handler()), token: tw.Token(tw.Tenant("docs"), "test"), worker: w, fake: fl}
}

func (e *jobsEnv) do(t *testing.T, method, path, token, key, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out, resp.Header
}

const jobJSON = `{"document":{"text":"The parcel for order 5120 arrived damaged; the customer wants a replacement."},
"pipeline":"summarise","prompt_version":"v1","model_profile":"fast"}`

func TestJobsAPI(t *testing.T) {
	t.Parallel()
	e := newJobsEnv(t)
	code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "", jobJSON)
	if code != 400 || out["code"] != jobs.ReasonMissingKey {
		t.Fatalf("without a key: %d %v", code, out)
	}
	if code, _, _ := e.do(t, http.MethodPost, "/api/v1/jobs", "", "k1", jobJSON); code != 401 {
		t.Fatalf("without a token: %d", code)
	}
	code, out, h := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "k1", jobJSON)
	id, _ := out["job_id"].(string)
	if code != 202 || id == "" || out["status"] != "queued" || len(out["dedup_key"].(string)) != 64 || h.Get("Location") != "/api/v1/jobs/"+id {
		t.Fatalf("submit: %d %v %v", code, out, h)
	}
	code, again, h := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "k1", jobJSON)
	if code != 200 || again["job_id"] != id || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %v", code, again)
	}
	other := strings.Replace(jobJSON, `"v1"`, `"v2"`, 1)
	if code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "k1", other); code != 422 || out["code"] != jobs.ReasonKeyReused {
		t.Fatalf("same key, other body: %d %v", code, out)
	}
	if code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "k9", strings.Replace(jobJSON, `"fast"`, `"huge"`, 1)); code != 422 || out["code"] != "unknown_model_profile" {
		t.Fatalf("unknown profile: %d %v", code, out)
	}

	for n := 1; n > 0; {
		var err error
		if n, err = e.worker.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	code, job, _ := e.do(t, http.MethodGet, "/api/v1/jobs/"+id, e.token, "", "")
	cps, _ := job["checkpoints"].([]any)
	res, _ := job["result"].(map[string]any)
	if code != 200 || job["status"] != "published" || len(cps) != 6 || res["summary"] == "" || job["operation_id"] == "" {
		t.Fatalf("GET: %d %v", code, job)
	}
	first := cps[0].(map[string]any)
	if first["stage"] != "uploaded" || first["input_hash"] == "" || first["code_version"] == "" {
		t.Fatalf("checkpoint: %v", first)
	}

	// Another key for the same computation is answered from it at once, without a generation.
	code, reuse, _ := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "k2", jobJSON)
	if code != 202 || reuse["status"] != "published" || reuse["dedup_key"] != job["dedup_key"] || reuse["job_id"] == id {
		t.Fatalf("reuse: %d %v", code, reuse)
	}
	if n := len(e.fake.Generations()); n != 1 {
		t.Fatalf("%d generations", n)
	}

	// Another tenant does not see the job.
	ten, _ := e.db.EnsureTenant(context.Background(), "stranger")
	tok, _ := e.db.CreateToken(context.Background(), ten.ID, "t")
	if code, _, _ := e.do(t, http.MethodGet, "/api/v1/jobs/"+id, tok, "", ""); code != 404 {
		t.Fatalf("another tenant: %d", code)
	}
}
