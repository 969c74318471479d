package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

// TestADoubleClickedAcknowledgeAcknowledgesOnce: the acknowledge button pressed twice, or
// by two engineers at once, acknowledges the exception once, with one audit row; the other
// request is shown the exception again with why nothing changed (a 409 with its status),
// not an error page. The same holds for two assignments sent at once from one page.
func TestADoubleClickedAcknowledgeAcknowledgesOnce(t *testing.T) {
	t.Parallel()
	e := newReconEnv(t)
	ctx := context.Background()
	opID, tenant := seedRecon(t, e)
	ex, _, err := reconstore.New(e.db).RecordFinding(ctx, recon.Finding{Kind: recon.ExceptionDoubleCharge, Provider: "stripe", Ref: opID,
		TenantID: tenant, OperationID: opID, ChargeRefs: []string{"re_a", "re_b"}, AmountCents: 3800, Currency: "usd",
		Summary: "Operation charged twice.", Actor: "stripe reconciliation", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	alice := signIn(t, e, "alice@example.com", desk.RoleOncall)
	bob := signIn(t, e, "bob@example.com", desk.RoleOncall)
	page := "/reconcile/exceptions/" + strconv.FormatInt(ex.ID, 10)
	v := strconv.FormatInt(ex.Version, 10)
	ack := url.Values{"version": {v}, "action": {"acknowledge"}}
	codes := postAtOnce(t, &dashEnv{env: e}, []*http.Client{alice, alice, bob}, page, []url.Values{ack, ack, ack})
	if n := countCodes(codes, http.StatusSeeOther); n != 1 || countCodes(codes, http.StatusConflict) != 2 {
		t.Fatalf("three acknowledges at once were answered %v, want one 303 and two 409", codes)
	}
	if n := e.countAudit(t, ex.ID, "acknowledge"); n != 1 {
		t.Fatalf("%d audit rows of an acknowledge, want 1", n)
	}
	got, err := reconstore.New(e.db).GetException(ctx, ex.ID)
	if err != nil || got.Status != recon.ExceptionAcknowledged {
		t.Fatalf("the exception is %+v (%v)", got, err)
	}
	assign := []url.Values{
		{"version": {strconv.FormatInt(got.Version, 10)}, "action": {"assign"}, "assignee": {"carol@example.com"}},
		{"version": {strconv.FormatInt(got.Version, 10)}, "action": {"assign"}, "assignee": {"dave@example.com"}},
	}
	codes = postAtOnce(t, &dashEnv{env: e}, []*http.Client{alice, bob}, page, assign)
	if countCodes(codes, http.StatusSeeOther) != 1 || countCodes(codes, http.StatusConflict) != 1 {
		t.Fatalf("two assignments at once were answered %v, want one 303 and one 409", codes)
	}
	if n := e.countAudit(t, ex.ID, "assign"); n != 1 {
		t.Fatalf("%d audit rows of an assignment, want 1", n)
	}
	resp, err := alice.PostForm(e.url+page, ack)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := new(strings.Builder)
	if _, err := io.Copy(b, resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusConflict || !strings.Contains(b.String(), "changed since you looked") ||
		!strings.Contains(b.String(), "acknowledged") {
		t.Fatalf("the acknowledge sent again = %d, want 409 saying it is acknowledged", resp.StatusCode)
	}
}

// TestADoubleClickedSaveKeepsOneView: "save view" pressed twice, or sent again from the
// back button, keeps one view with one audit row, and each press is answered with that view,
// not told to choose another name; the same name with another filter still is. Deleting
// it twice deletes once, and the second delete is told there is no such view.
func TestADoubleClickedSaveKeepsOneView(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	form := url.Values{"page": {"ops"}, "name": {"unknown refunds"}, "query": {"tab=unknown&kind=refund"}, "role": {"support"}}
	codes := postAtOnce(t, e, []*http.Client{alice, alice}, "/views", []url.Values{form, form})
	if countCodes(codes, http.StatusSeeOther) != 2 {
		t.Fatalf("two saves at once were answered %v, want a 303 each", codes)
	}
	if resp := e.post(t, alice, "/views", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the save sent again = %d, want 303", resp.StatusCode)
	}
	other := url.Values{"page": {"ops"}, "name": {"Unknown refunds"}, "query": {"tab=unknown&kind=llm_call"}, "role": {"support"}}
	if resp := e.post(t, alice, "/views", other); resp.StatusCode != http.StatusConflict {
		t.Fatalf("the name with another filter = %d, want 409", resp.StatusCode)
	}
	if n := e.count(t, `SELECT count(*) FROM saved_views`); n != 1 {
		t.Fatalf("%d saved views, want 1", n)
	}
	if n := e.auditCount(t, "saved_view.add"); n != 1 {
		t.Fatalf("%d audit rows of a saved view, want 1", n)
	}
	id := e.count(t, `SELECT id::int FROM saved_views`)
	del := "/views/" + itoa(int64(id)) + "/delete"
	codes = postAtOnce(t, e, []*http.Client{alice, alice}, del, []url.Values{{}, {}})
	if countCodes(codes, http.StatusSeeOther) != 1 || countCodes(codes, http.StatusNotFound) != 1 {
		t.Fatalf("two deletes at once were answered %v, want one 303 and one 404", codes)
	}
	if n := e.auditCount(t, "saved_view.delete"); n != 1 {
		t.Fatalf("%d audit rows of a deleted view, want 1", n)
	}
}

func countCodes(codes []int, want int) int {
	n := 0
	for _, c := range codes {
		if c == want {
			n++
		}
	}
	return n
}

// countAudit counts the audit rows of action on exception id.
func (e *env) countAudit(t *testing.T, id int64, action string) int {
	t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE entity = 'recon_exception'
		AND entity_id = $1 AND action LIKE '%' || $2 || '%'`, strconv.FormatInt(id, 10), action).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
