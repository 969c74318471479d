package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestForgedOperationIDsAnswerNotFound: an operation id in the API's path is a client's
// text. Every spelling of a UUID the parser takes (urn:uuid:, braces, upper case, no
// hyphens), of another tenant's operation or of none, answers 404, as an id that does not
// exist does: never the operation, and never a 4xx that tells them apart ("breaks a rule of
// the ledger" came from the database refusing the urn: form).
func TestForgedOperationIDsAnswerNotFound(t *testing.T) {
	t.Parallel()
	e := newRefundEnv(t)
	code, out, _ := e.post(t, "/api/v1/refunds", "application/json", storyBody)
	if code != 200 {
		t.Fatalf("%d %v", code, out)
	}
	id := out["operation_id"].(string)
	other, _ := e.db.EnsureTenant(context.Background(), "other")
	tok, _ := e.db.CreateToken(context.Background(), other.ID, "t")
	get := func(token, path string) int {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/api/v1/operations/"+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	missing := "0b6f3c1e-1d2a-4c3b-9e8f-7a6b5c4d3e2f"
	for _, forged := range []string{id, "urn:uuid:" + id, "%7B" + id + "%7D", strings.ToUpper(id), strings.ReplaceAll(id, "-", ""),
		missing, "urn:uuid:" + missing, "not-a-uuid"} {
		if got := get(tok, forged); got != http.StatusNotFound {
			t.Errorf("another tenant GET %s = %d, want 404", forged, got)
		}
	}
	// The owner finds its operation under the spellings the parser takes.
	for _, spelt := range []string{"urn:uuid:" + id, strings.ToUpper(id)} {
		if got := get(e.token, spelt); got != http.StatusOK {
			t.Errorf("owner GET %s = %d, want 200", spelt, got)
		}
	}
}
