package ops_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// ledgerProtocol is what the Ledger offers the flows: admission, the attempt loop, answers
// (a refusal after admission among them),
// the requests that open, join and send nothing (a refusal, a cancel), closes, the provider's records and events, the reaper's sweep, kinds and reads. Every
// other step of an operation's life is the Ledger's own, so no flow can take one out of
// order (a claim without admission, an attempt without its record, a status without its
// audit row).
var ledgerProtocol = []string{
	"Admit", "Readmit", "Run", "Answer", "AnswerRefused", "Refuse", "RefuseAs", "RecordRequest", "Close", "CloseBilled",
	"ApplyRecord", "ApplyEvent", "ExpireDue",
	"Register", "Kind", "Kinds",
	"Get", "Attempts", "LatestForIntent",
}

// TestLedgerExportsOnlyTheProtocol fails when the Ledger exports a method outside its
// protocol. Tests that need an operation in a given state seed it with ops/opstest, through
// admission and the attempt loop, not through an exported step.
func TestLedgerExportsOnlyTheProtocol(t *testing.T) {
	typ := reflect.TypeFor[*ops.Ledger]()
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		if !slices.Contains(ledgerProtocol, name) {
			t.Errorf("Ledger.%s is exported but is not part of the protocol: make it internal, or add it to ledgerProtocol if every flow may call it", name)
		}
	}
}
