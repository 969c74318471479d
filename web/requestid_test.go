package web_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
)

func TestInternalErrorShowsRequestIDAndNoDetail(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	h := s.HandlerWithPage("/boom", desk.RoleSupport, func(w http.ResponseWriter, r *http.Request) {
		s.Error(w, r, errors.New("pq: relation secret_table does not exist"))
	})
	e := start(t, tw, s.WithRequestIDMiddleware(h))
	e.user(t, "a@example.com", desk.RoleSupport)
	c := client(t)
	e.login(t, c, "a@example.com", password)
	r, body := e.get(t, c, "/boom")
	id := r.Header.Get("X-Request-Id")
	if r.StatusCode != 500 || id == "" {
		t.Fatalf("GET /boom = %d, request id %q", r.StatusCode, id)
	}
	if !strings.Contains(body, "Internal error.") || !strings.Contains(body, `data-testid="error-request-id">`+id+`<`) {
		t.Errorf("the error page lacks the message or the request id:\n%s", body)
	}
	if strings.Contains(body, "secret_table") {
		t.Error("the internal error text leaks to the page")
	}
}
