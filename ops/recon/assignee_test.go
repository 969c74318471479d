package recon_test

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

// TestAnAssigneeShowsAsItself: the exception queue tells every person who owns an exception
// by its assignee alone. An assignee holding a right-to-left override, a zero-width space or
// a no-break space would show as someone else ("moc.elpmaxe@ob" read backwards is
// bo@example.com), so whoever the queue names would not be who was meant to settle it
// (ops rule 12: no answer says more than Settle knows). Such an assignee is refused and
// changes nothing; one in another script is kept.
func TestAnAssigneeShowsAsItself(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	w.outsideRefund(t, 1500, nil)
	if _, err := w.recon.Reconcile(ctx, "stripe", w.window()); err != nil {
		t.Fatal(err)
	}
	store := reconstore.New(w.db)
	list, err := store.ListExceptions(ctx, recon.ExceptionFilter{Status: recon.ExceptionOpen})
	if err != nil || len(list) != 1 {
		t.Fatalf("open exceptions: %+v (%v)", list, err)
	}
	ex := list[0]
	assign := func(who string) (*recon.Exception, error) {
		return recon.ChangeException(ctx, store, recon.ExceptionChange{ID: ex.ID, At: w.clock.Now(), Actor: "ana@example.com",
			Version: ex.Version, Action: recon.ActionAssign, Assignee: who})
	}
	for _, who := range []string{"\u202emoc.elpmaxe@ob", "bo\u200b@example.com", "bo\u00a0smith", "bo\u2028@example.com"} {
		if got, err := assign(who); ops.ErrorCode(err) != ops.EINVALID {
			t.Errorf("assignee %q: %+v (%v), want refused as invalid", who, got, err)
		}
	}
	cur, err := store.GetException(ctx, ex.ID)
	if err != nil || cur.Version != ex.Version || cur.Assignee != ex.Assignee {
		t.Fatalf("after refused assignees the exception is %+v (%v), want it unchanged", cur, err)
	}
	if got, err := assign("Сергей Иванов"); err != nil || got.Assignee != "Сергей Иванов" {
		t.Fatalf("an assignee in Cyrillic: %+v (%v), want it kept", got, err)
	}
}
