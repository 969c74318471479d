package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A job body nested a thousand deep, a megabyte long, with one NUL at the bottom is refused
// as fast as a flat one: its strings are checked in one pass over the body, not once per
// level (each level's decoding read everything below it again, some thirty seconds of a
// CPU for one authenticated request). The refusal still names the field, and so does one
// of a flat body.
func TestADeeplyNestedJobBodyIsRefusedInOnePass(t *testing.T) {
	t.Parallel()
	e := newJobsEnv(t)
	const depth = 1000
	nested := `{"document":{"text":"x"},"pipeline":"summarise","prompt_version":"v1","model_profile":"fast","extra":` +
		strings.Repeat(`{"a":`, depth) + `"` + strings.Repeat("y", 900<<10) + `\u0000"` + strings.Repeat("}", depth) + `}`
	start := time.Now()
	status, body, _ := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "nested-1", nested)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the nested body took %s to refuse", took)
	}
	detail, _ := body["detail"].(string)
	if status != http.StatusUnprocessableEntity || !strings.HasPrefix(detail, "extra.a.a.") || !strings.HasSuffix(detail, "contains a NUL character.") {
		t.Fatalf("nested body: %d %v", status, body)
	}
	flat := `{"document":{"text":"a\u0000b"},"pipeline":"summarise","prompt_version":"v1","model_profile":"fast"}`
	status, body, _ = e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "flat-1", flat)
	if detail, _ := body["detail"].(string); status != http.StatusUnprocessableEntity || detail != "document.text contains a NUL character." {
		t.Fatalf("flat body: %d %v", status, body)
	}
	bad := "{\"document\":{\"text\":\"caf\xc3\"},\"pipeline\":\"summarise\",\"prompt_version\":\"v1\",\"model_profile\":\"fast\"}"
	status, body, _ = e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "flat-2", bad)
	if detail, _ := body["detail"].(string); status != http.StatusUnprocessableEntity || detail != "document.text is not valid UTF-8." {
		t.Fatalf("body with bytes that are not UTF-8: %d %v", status, body)
	}
}
