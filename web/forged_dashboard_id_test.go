package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
)

// TestDashboardTakesEverySpellingOfAnOperationID: the id check takes spellings of a UUID
// that PostgreSQL refuses (urn:uuid:) or spells otherwise (upper case, no hyphens); a
// person who pastes one into the address bar, the search box or a form gets the operation,
// never a server error, and an id of no operation gets the page saying so.
func TestDashboardTakesEverySpellingOfAnOperationID(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	oncall := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	op := e.notSentUnknown(t, "9101")
	for _, spelt := range []string{"urn:uuid:" + op.ID, strings.ToUpper(op.ID), strings.ReplaceAll(op.ID, "-", "")} {
		if code, body := e.page(t, oncall, "/ops/"+url.PathEscape(spelt)); code != http.StatusOK || !strings.Contains(body, "9101") {
			t.Errorf("GET /ops/%s = %d, want the operation's page", spelt, code)
		}
		for _, path := range []string{"/ops?q=", "/support?q="} {
			if code, body := e.page(t, oncall, path+url.QueryEscape(spelt)); code != http.StatusOK || !strings.Contains(body, op.ID) {
				t.Errorf("GET %s%s = %d, want the operation listed", path, spelt, code)
			}
		}
	}
	missing := "urn:uuid:0b6f3c1e-1d2a-4c3b-9e8f-7a6b5c4d3e2f"
	if code, _ := e.page(t, oncall, "/ops/"+url.PathEscape(missing)); code != http.StatusNotFound {
		t.Errorf("GET /ops/%s = %d, want 404", missing, code)
	}
}
