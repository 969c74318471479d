package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/web"
)

// unstorableNotes are what a person pastes from a terminal or a binary log into a note: a
// NUL, bytes that are not UTF-8, an escape sequence that recolours a terminal that prints
// the audit log.
var unstorableNotes = []string{"paid\x00 see log", "paid \xff\xfe", "paid \x1b[2J\x1b[31mOK"}

// TestNotesThatCannotBeKeptAreRefusedReadably: a note of a close, a close as not
// executed, a rejection or a reconciliation exception that holds a NUL, bytes that are not
// UTF-8 or a control character other than a line break or a tab is refused with a sentence
// on the page, never a server error, and nothing is closed, proposed, decided or changed;
// a note with line breaks and tabs is kept (ops rule 6: a refused close changes nothing).
func TestNotesThatCannotBeKeptAreRefusedReadably(t *testing.T) {
	t.Parallel()
	min := int64(1000)
	e := newDashEnv(t, withApprovals(ops.ApprovalPolicy{MinCents: &min}), func(s *web.Server, tw *testworld.World) {
		s.Recon, s.Exceptions, s.Operations = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB
	})
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	bob := e.signIn(t, "bob@example.com", desk.RoleOncall)
	small, big := e.notSentUnknown(t, "9101"), e.notSentUnknown(t, "9102")
	if _, err := e.db.Pool.Exec(t.Context(), `UPDATE operations SET amount_cents = 500 WHERE id = $1`, small.ID); err != nil {
		t.Fatal(err)
	}
	small = e.get(t, small.ID)
	smallRef := e.heldRefund(t, small, "re_small")
	e.post(t, alice, "/ops/"+big.ID+"/close", url.Values{"version": {itoa(big.Version)}, "to": {"succeeded"}, "provider_ref": {e.heldRefund(t, big, "re_big")}, "note": {"Stripe shows it."}})
	_, body := e.page(t, bob, "/ops/"+big.ID)
	proposal := shownProposal(body)
	ex, _, err := reconstore.New(e.db).RecordFinding(context.Background(), recon.Finding{Kind: recon.ExceptionDoubleCharge, Provider: "stripe",
		Ref: small.ID, TenantID: e.tenant.ID, OperationID: small.ID, ChargeRefs: []string{"re_a", "re_b"}, AmountCents: 500, Currency: "usd",
		Summary: "Operation charged twice.", Actor: "stripe reconciliation", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	exPage := "/reconcile/exceptions/" + strconv.FormatInt(ex.ID, 10)

	for _, note := range unstorableNotes {
		for _, try := range []struct {
			c    *http.Client
			path string
			form url.Values
			page string
		}{
			{alice, "/ops/" + small.ID + "/close", url.Values{"version": {itoa(small.Version)}, "to": {"succeeded"}, "provider_ref": {smallRef}}, "/ops/" + small.ID},
			{alice, "/ops/" + small.ID + "/close-not-executed", url.Values{"version": {itoa(small.Version)}}, "/ops/" + small.ID},
			{bob, "/ops/" + big.ID + "/reject", url.Values{"version": {itoa(big.Version)}, "proposal_id": {proposal}}, "/ops/" + big.ID},
			{bob, exPage, url.Values{"version": {"1"}, "action": {"resolve"}}, ""},
			{bob, exPage, url.Values{"version": {"1"}, "action": {"assign"}, "assignee": {note}, "note": {"mine"}}, ""},
		} {
			if try.form.Get("note") == "" {
				try.form.Set("note", note)
			}
			what := "POST " + try.path + " with " + strconv.Quote(note)
			resp, err := try.c.PostForm(e.url+try.path, try.form)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body := string(b)
			if resp.StatusCode == http.StatusSeeOther && try.page != "" {
				_, body = e.page(t, try.c, try.page)
			}
			if resp.StatusCode >= 500 || !strings.Contains(body, "control character") && !strings.Contains(body, "not valid UTF-8") {
				t.Errorf("%s = %d, want a sentence saying why: %.300s", what, resp.StatusCode, body)
			}
		}
	}
	if cur := e.get(t, small.ID); cur.Version != small.Version {
		t.Errorf("a refused note closed %s: %s v%d", small.ID, cur.Status, cur.Version)
	}
	if n := e.count(t, `SELECT count(*) FROM close_proposals WHERE operation_id = $1 OR state <> 'open'`, small.ID); n != 0 {
		t.Errorf("refused notes proposed or decided %d proposals", n)
	}
	if cur, err := reconstore.New(e.db).GetException(context.Background(), ex.ID); err != nil || cur.Version != 1 {
		t.Errorf("refused notes changed the exception: %+v, %v", cur, err)
	}

	kept := "Stripe shows re_small.\r\n\tChecked twice."
	e.post(t, alice, "/ops/"+small.ID+"/close", url.Values{"version": {itoa(small.Version)}, "to": {"succeeded"}, "provider_ref": {smallRef}, "note": {kept}})
	if cur := e.get(t, small.ID); cur.Status != ops.StatusSucceeded {
		t.Fatalf("a note with line breaks and a tab left the operation %s", cur.Status)
	}
}
