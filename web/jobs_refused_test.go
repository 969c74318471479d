package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// Every refused POST /api/v1/jobs of a tenant is recorded once as its client request, and
// changes nothing else (ops rule 8): a malformed body, a missing or unusable
// Idempotency-Key, a field given twice, an unknown model profile, a document with no word and
// a key reused for another document each get their problem, and each is counted.
func TestARefusedJobRequestIsRecordedOnce(t *testing.T) {
	t.Parallel()
	e := newJobsEnv(t)
	code, first, _ := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "kept", jobJSON)
	if code != http.StatusAccepted {
		t.Fatalf("first job: %d %v", code, first)
	}
	cases := []struct {
		name, key, body, reason string
		status                  int
	}{
		{"malformed JSON", "m1", `{"document":`, "malformed_json", http.StatusBadRequest},
		{"field given twice", "m2", strings.Replace(jobJSON, `"pipeline":"summarise"`, `"pipeline":"summarise","pipeline":"summarise"`, 1), "invalid_field", http.StatusUnprocessableEntity},
		{"no key", "", jobJSON, "missing_idempotency_key", http.StatusBadRequest},
		{"key not ASCII", "ключ", jobJSON, "invalid_idempotency_key", http.StatusBadRequest},
		{"unknown profile", "m3", strings.Replace(jobJSON, `"fast"`, `"huge"`, 1), "unknown_model_profile", http.StatusUnprocessableEntity},
		{"no word", "m4", `{"document":{"text":"  "},"pipeline":"summarise","prompt_version":"v1","model_profile":"fast"}`, "invalid_document", http.StatusUnprocessableEntity},
		{"key reused", "kept", strings.Replace(jobJSON, "damaged", "late", 1), "idempotency_key_reused", http.StatusUnprocessableEntity},
	}
	for _, c := range cases {
		code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, c.key, c.body)
		if code != c.status || out["code"] != c.reason {
			t.Errorf("%s: %d %v, want %d %s", c.name, code, out, c.status, c.reason)
		}
	}
	var rejected, jobsN, dups int
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT
	(SELECT count(*) FROM client_requests WHERE kind = 'llm_job' AND answer = 'rejected' AND operation_id IS NULL),
	(SELECT count(*) FROM jobs), (SELECT coalesce(sum(duplicate_posts), 0) FROM jobs)`).Scan(&rejected, &jobsN, &dups); err != nil {
		t.Fatal(err)
	}
	if rejected != len(cases) {
		t.Errorf("%d refused job requests recorded, want %d", rejected, len(cases))
	}
	if jobsN != 1 || dups != 0 {
		t.Errorf("after the refusals: %d jobs with %d duplicate posts, want the one job and none", jobsN, dups)
	}
}
