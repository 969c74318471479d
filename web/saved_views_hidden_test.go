package web_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
)

// A view shared with a role above a person's is not theirs to see: asking to delete it by
// its id is answered as for a view that does not exist, so neither its name nor its
// author's address shows, and it stays.
func TestSavedViewsHiddenFromAPersonStayHiddenByID(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	admin := e.signIn(t, "admin@example.com", desk.RoleAdmin)
	support := e.signIn(t, "support@example.com", desk.RoleSupport)
	e.post(t, admin, "/views", url.Values{"page": {"ops"}, "name": {"Refunds of the acquisition target"}, "role": {"admin"},
		"query": {"tab=unknown&kind=refund"}})
	id := savedViewID(t, e, "Refunds of the acquisition target")
	hidden, err := support.PostForm(e.url+"/views/"+id+"/delete", nil)
	if err != nil {
		t.Fatal(err)
	}
	hiddenBody := readBody(t, hidden)
	missing, err := support.PostForm(e.url+"/views/999999/delete", nil)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, missing)
	if hidden.StatusCode != missing.StatusCode || strings.Contains(hiddenBody, "acquisition") || strings.Contains(hiddenBody, "admin@example.com") {
		t.Errorf("deleting a view shared with admins only = %d %q; want %d as for no view, naming neither it nor its author",
			hidden.StatusCode, hiddenBody, missing.StatusCode)
	}
	savedViewID(t, e, "Refunds of the acquisition target")
}
