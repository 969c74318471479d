package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestTheAnswersIDIsReadThroughItsOperation: the close of a successful attempt leaves the
// provider's id of the answer off the attempt's row (so that the close adds no index entry)
// and on its operation. Every reader still finds it: the attempt's ids, which lookups and a
// background response's follow read (ops rule 11); the tenant's response read through
// Settle, and no other tenant's; the owner of the record, which a close by hand checks
// (ops rules 9 and 12). An id that a person named in a close by hand, which no attempt got
// back from the provider, opens no response: only the provider's answer to a send proves a
// response is the tenant's.
func TestTheAnswersIDIsReadThroughItsOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	op := f.llmCall(t, "answer-ref", "/v1/responses", "m")

	refs, err := f.db.AttemptRefs(ctx, op.ID)
	if err != nil || len(refs) != 1 || refs[1] != "resp_answer-ref" {
		t.Errorf("the attempts' ids %v (%v), want attempt 1 with resp_answer-ref", refs, err)
	}
	if got, err := f.db.ResponseOperation(ctx, f.tenant, "resp_answer-ref"); err != nil || got != op.ID {
		t.Errorf("the response's call is %q (%v), want %s", got, err, op.ID)
	}
	var other int64
	if err := f.db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('other') RETURNING id`).Scan(&other); err != nil {
		t.Fatal(err)
	}
	if got, err := f.db.ResponseOperation(ctx, other, "resp_answer-ref"); ops.ErrorCode(err) != ops.ENOTFOUND {
		t.Errorf("another tenant reads the response through %q (%v), want not found", got, err)
	}
	if owner, err := f.db.RecordOwner(ctx, "openai", "resp_answer-ref", ops.NewOperationID()); err != nil || owner != op.ID {
		t.Errorf("the record's owner is %q (%v), want %s", owner, err, op.ID)
	}

	byHand := f.handClosedCall(t, "by-hand", "resp_named_by_hand")
	if got, err := f.db.ResponseOperation(ctx, f.tenant, "resp_named_by_hand"); ops.ErrorCode(err) != ops.ENOTFOUND {
		t.Errorf("an id named by hand on %s opens the response of %q (%v), want not found", byHand.ID, got, err)
	}
	if refs, err := f.db.AttemptRefs(ctx, byHand.ID); err != nil || len(refs) != 0 {
		t.Errorf("the attempts of a call closed by hand got %v (%v) from the provider, want none", refs, err)
	}
}

// TestAResponsesCallIsFoundUnderEachProviderOnTheOperationsIndex: the search for the call
// that got a response's id reads the operations through operations_tenant_provider_ref_idx
// with tenant, provider and id, one probe under each of the tenant's providers, never by
// reading every record of the tenant.
func TestAResponsesCallIsFoundUnderEachProviderOnTheOperationsIndex(t *testing.T) {
	plan := pgtest.PlanWithoutSeqScan(t, pgtest.New(t), pg.ResponseOperationSQL, pgx.NamedArgs{"tenant": 1, "ref": "resp_1"})
	if !strings.Contains(plan, "operations_tenant_provider_ref_idx") || !strings.Contains(plan, "(provider = p.provider)") {
		t.Fatalf("the call of a response is not looked for under each provider on the operations' index:\n%s", plan)
	}
}

// handClosedCall opens a Responses call whose send timed out and has a person close it as
// succeeded with ref, and returns it.
func (f *fixture) handClosedCall(t *testing.T, key, ref string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	in := ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: key, Fingerprint: "fp-" + key,
		Request:   []byte(`{"policy":"interactive","route":"/v1/responses","body":{"model":"m","input":"hi"}}`),
		Retention: 24 * time.Hour}
	o, err := f.seed().Open(ctx, in, "req-"+key, "gw")
	if err != nil {
		t.Fatal(err)
	}
	op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "gw", ops.AttemptResult{Outcome: ops.OutcomeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status == ops.StatusInProgress {
		if op, err = f.seed().MarkUnknown(ctx, op, "gw", "timed out"); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(time.Hour)
	op, err = f.ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
		Actor: "oncall@example.com", Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: ref, Summary: "seen in the console"}})
	if err != nil {
		t.Fatal(err)
	}
	return op
}
