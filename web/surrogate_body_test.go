package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestAJobDocumentWithHalfASurrogatePairIsRefused: a body whose text escapes half of a
// UTF-16 pair ("\ud83d" alone), which PostgreSQL's jsonb refuses, is the client's error,
// refused 422 naming the field as a NUL is, never a 500 from the database.
func TestAJobDocumentWithHalfASurrogatePairIsRefused(t *testing.T) {
	t.Parallel()
	e := newJobsEnv(t)
	body := `{"document":{"text":"half an emoji \ud83d"},"pipeline":"summarise","prompt_version":"v1","model_profile":"fast"}`
	status, got, _ := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "surrogate-1", body)
	if detail, _ := got["detail"].(string); status != http.StatusUnprocessableEntity || !strings.HasPrefix(detail, `document.text contains half of a UTF-16 surrogate pair`) {
		t.Fatalf("a document with half a surrogate pair: %d %v", status, got)
	}
	whole := `{"document":{"text":"a whole emoji \ud83d\ude00"},"pipeline":"summarise","prompt_version":"v1","model_profile":"fast"}`
	if status, got, _ := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "surrogate-2", whole); status >= 300 {
		t.Fatalf("a document with a whole pair: %d %v", status, got)
	}
}
