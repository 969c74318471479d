package desk

import (
	"errors"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// A lookup whose provider answered but whose close met an outage of Settle's own database
// is not "the provider could not be asked": the answer says what Settle knows (ops rule 12).
func TestLookupThatLostTheDatabaseSaysSo(t *testing.T) {
	var out LookupOutcome
	done, err := lookupEnded(&out, ops.LookupResult{}, ops.Applied{}, ops.DatabaseUnreachable(errors.New("connection refused")))
	if !done || err != nil {
		t.Fatalf("lookupEnded: done %v, err %v", done, err)
	}
	if out.Outcome != LookupUnavailable || strings.Contains(out.Message, "provider could not be asked") ||
		!strings.Contains(out.Message, "database") {
		t.Fatalf("outcome %q, message %q: want unavailable, naming Settle's database", out.Outcome, out.Message)
	}
	out = LookupOutcome{}
	if _, err := lookupEnded(&out, ops.LookupResult{}, ops.Applied{}, ops.Errorf(ops.EUNAVAILABLE, "Stripe is down")); err != nil ||
		!strings.Contains(out.Message, "provider could not be asked") {
		t.Fatalf("a provider that could not be asked: %q, %v", out.Message, err)
	}
}
