package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// A tenant that guesses or reuses another tenant's job id reads nothing of it, and is told
// exactly what it is told for an id no job has, so the answer says nothing of whether the
// job exists; the other tenant's Idempotency-Key is a key of its own, which makes its own job.
func TestAnotherTenantsJobIsAnsweredLikeNoJob(t *testing.T) {
	t.Parallel()
	e := newJobsEnv(t)
	ctx := context.Background()
	other, err := e.db.EnsureTenant(ctx, "hostile")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := e.db.CreateToken(ctx, other.ID, "hostile")
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := e.do(t, http.MethodPost, "/api/v1/jobs", e.token, "victim-key", jobJSON)
	id, _ := out["job_id"].(string)
	if code != http.StatusAccepted || id == "" {
		t.Fatalf("victim's submit: %d %v", code, out)
	}
	const unused = "01a24815-ffd0-7db6-a6c7-c54dacc49bcd"
	if code, none, _ := e.do(t, http.MethodGet, "/api/v1/jobs/"+unused, tok, "", ""); code != http.StatusNotFound || none["code"] != "not_found" || !strings.Contains(toString(none["detail"]), unused) {
		t.Fatalf("an unused id: %d %v", code, none)
	}
	_, none, _ := e.do(t, http.MethodGet, "/api/v1/jobs/"+unused, tok, "", "")
	for _, spelt := range []string{id, strings.ToUpper(id), "urn:uuid:" + id} {
		code, got, _ := e.do(t, http.MethodGet, "/api/v1/jobs/"+spelt, tok, "", "")
		if code != http.StatusNotFound || got["code"] != none["code"] ||
			strings.ReplaceAll(toString(got["detail"]), id, "ID") != strings.ReplaceAll(toString(none["detail"]), unused, "ID") {
			t.Errorf("GET %s as another tenant: %d %v; an unused id: %v", spelt, code, got, none)
		}
	}
	code, mine, _ := e.do(t, http.MethodPost, "/api/v1/jobs", tok, "victim-key", jobJSON)
	if code != http.StatusAccepted || mine["job_id"] == id || mine["dedup_key"] == out["dedup_key"] {
		t.Fatalf("the other tenant's submit with the same key and body: %d %v, want a new job of its own", code, mine)
	}
}
