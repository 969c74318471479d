package web_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/web"
)

// TestANoteInAnotherScriptWithinTheFormsLimitIsKept: the note fields let a person type
// 2000 characters. An engineer writes 1900 of them in Japanese, three bytes each: the close
// and the resolution of a reconciliation exception keep the note as written, never refuse it
// as "longer than 2000 characters" nor its form as unreadable, and the close is made once
// (ops rule 6: a close records its evidence with it). One character past the limit is still
// refused in a sentence, and changes nothing.
func TestANoteInAnotherScriptWithinTheFormsLimitIsKept(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t, func(s *web.Server, tw *testworld.World) {
		s.Recon, s.Exceptions, s.Operations = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB
	})
	alice := e.signIn(t, "alice@example.com", desk.RoleOncall)
	note := strings.Repeat("返金確認済", 380)
	if n := utf8.RuneCountInString(note); n != 1900 {
		t.Fatalf("the note has %d characters", n)
	}
	long, op := e.notSentUnknown(t, "9141"), e.notSentUnknown(t, "9142")

	e.post(t, alice, "/ops/"+long.ID+"/close", url.Values{"version": {itoa(long.Version)}, "to": {"succeeded"},
		"provider_ref": {e.heldRefund(t, long, "re_long")}, "note": {note + strings.Repeat("済", 101)}})
	_, body := e.page(t, alice, "/ops/"+long.ID)
	mustContain(t, body, "The note is longer than 2000 characters.")
	if cur := e.get(t, long.ID); cur.Version != long.Version {
		t.Fatalf("a note past the limit changed the operation: %s v%d", cur.Status, cur.Version)
	}

	e.post(t, alice, "/ops/"+op.ID+"/close", url.Values{"version": {itoa(op.Version)}, "to": {"succeeded"},
		"provider_ref": {e.heldRefund(t, op, "re_kept")}, "note": {note}})
	if cur := e.get(t, op.ID); cur.Status != ops.StatusSucceeded {
		_, body = e.page(t, alice, "/ops/"+op.ID)
		t.Fatalf("a close with a note of 1900 characters left the operation %s: %.400s", cur.Status, between(t, body, `class="flash`, `</div>`))
	}
	if n := e.count(t, `SELECT count(*) FROM evidence WHERE operation_id = $1 AND kind = 'note' AND summary = $2`, op.ID, note); n != 1 {
		t.Fatalf("%d notes kept as written, want 1", n)
	}

	ex, _, err := reconstore.New(e.db).RecordFinding(context.Background(), recon.Finding{Kind: recon.ExceptionDoubleCharge, Provider: "stripe",
		Ref: op.ID, TenantID: e.tenant.ID, OperationID: op.ID, ChargeRefs: []string{"re_a", "re_b"}, AmountCents: 500, Currency: "usd",
		Summary: "Operation charged twice.", Actor: "stripe reconciliation", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	e.post(t, alice, "/reconcile/exceptions/"+strconv.FormatInt(ex.ID, 10), url.Values{"version": {"1"}, "action": {"resolve"}, "note": {note}})
	if cur, err := reconstore.New(e.db).GetException(context.Background(), ex.ID); err != nil || cur.Status != recon.ExceptionResolved || cur.Note != note {
		t.Fatalf("the resolution with a note of 1900 characters: %v, %+v", err, cur)
	}
}
