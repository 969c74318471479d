package web_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/settle-dev/settle/web"
)

// TestShedMessagesCallIsAnthropicsOverloadedError: a shed request of Anthropic's Messages
// API is answered in that API's error shape with its overloaded_error type, which Anthropic's
// clients read as "busy, try again" rather than as a fault of the server, with Retry-After.
// Nothing of it is recorded (ops rule 8: refused before it names its tenant).
func TestShedMessagesCallIsAnthropicsOverloadedError(t *testing.T) {
	t.Parallel()
	w := newShedWorld(t, 0, func(s *web.Server) {
		s.WriteBacklog = func() time.Duration { return time.Second }
		s.MaxWriteBacklog = 250 * time.Millisecond
	})
	resp, err := w.send("/v1/messages", "busy", `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Type  string `json:"type"`
		Error struct {
			Type    string            `json:"type"`
			Message string            `json:"message"`
			Details map[string]string `json:"details"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("the answer is not Anthropic's error shape: %v", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("shed /v1/messages: %d, Retry-After %q; want 503 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if body.Type != "error" || body.Error.Type != "overloaded_error" || body.Error.Details["error_code"] != web.ReasonOverloaded {
		t.Errorf("shed /v1/messages answered %+v, want an error of type overloaded_error with error_code %q", body, web.ReasonOverloaded)
	}
	if ops, reqs := w.rows(t); ops != 0 || reqs != 0 {
		t.Errorf("the shed call recorded %d operations and %d client requests, want none", ops, reqs)
	}
}
