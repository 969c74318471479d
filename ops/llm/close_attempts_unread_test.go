package llm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/llm"
)

// TestACloseWithAResponseSaysWhenSettlesOwnRecordCannotBeRead: a person closes an unknown
// Responses call as succeeded with its response id while Settle's own record of the call's
// attempts cannot be read. Settle cannot tell whether the response is this call's, so the
// close is refused and changes nothing, in a sentence that says what failed (Settle's own
// record, not the provider, which was never asked); while the database is out, the refusal
// stays an outage, to try again once it is back. Once the record reads again, the same close
// goes through with the provider's answer.
func TestACloseWithAResponseSaysWhenSettlesOwnRecordCannotBeRead(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, behindRelay: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	d := w.lookupDesk()
	ctx := context.Background()
	op, gen := w.brokenResponse(t, "resp-unread")
	closeIt := func() error {
		_, err := d.CloseManually(ctx, desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
			ProviderRef: gen.ID, Note: "The provider's console shows it.", Actor: "oncall@example.com"})
		return err
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := w.db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}

	// A failure of Settle's own database that is no outage: the ids recorded on the
	// attempts cannot be read, while whose record the id is still can.
	exec(`ALTER TABLE attempts RENAME COLUMN outcome TO outcome_unreadable`)
	for _, err := range []error{closeIt(), func() error { _, _, err := w.lookups.Fetch(ctx, op, gen.ID); return err }()} {
		msg := ops.ErrorMessage(err)
		// ops rule 9
		if ops.ErrorCode(err) != ops.EUNAVAILABLE || ops.Unreachable(err) ||
			!strings.Contains(msg, "Settle could not read its own record of this call's attempts") || strings.Contains(msg, "could not be asked") {
			t.Fatalf("the close while the attempts cannot be read: %v (%q)", err, msg)
		}
	}
	exec(`ALTER TABLE attempts RENAME COLUMN outcome_unreadable TO outcome`)
	if cur := w.op(t, "resp-unread"); cur.Status != ops.StatusUnknown || cur.Version != op.Version {
		t.Fatalf("the refused close left %s v%d (was v%d)", cur.Status, cur.Version, op.Version)
	}

	// An outage stays an outage: the person is told to try again once the database is back.
	w.relay.Off()
	_, _, err := w.lookups.Fetch(ctx, op, gen.ID)
	w.relay.On()
	// ops rule 9
	if !ops.Unreachable(err) || ops.ErrorCode(err) != ops.EUNAVAILABLE || strings.Contains(ops.ErrorMessage(err), "could not be asked") {
		t.Fatalf("the close while the database is out: %v (%q)", err, ops.ErrorMessage(err))
	}

	if err := closeIt(); err != nil {
		t.Fatal(err)
	}
	if cur := w.op(t, "resp-unread"); cur.Status != ops.StatusSucceeded || cur.ProviderRef != gen.ID || len(cur.Result) == 0 {
		t.Fatalf("the close once the record reads left %s with %q and %d bytes of answer", cur.Status, cur.ProviderRef, len(cur.Result))
	}
}
