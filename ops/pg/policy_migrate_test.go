package pg_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/settle-dev/settle/ops"
)

// TestPolicyMigrationFillsTheRulesOfItsTime: operations written before migration 00045 carry,
// after it, the policy the code applied to them then: a refund is resent with its key and
// looked up before it fails; an LLM call follows the policy stored with its request
// (interactive when it names none, as the gateway's default is); a job's generation is not
// resent. Every LLM operation counts a resend as a possible duplicate (ops rules 5 and 11).
func TestPolicyMigrationFillsTheRulesOfItsTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if err := f.db.MigrateDownTo(ctx, 43); err != nil {
		t.Fatal(err)
	}
	seed := func(kind ops.Kind, request string) string {
		id := uuid.NewString()
		if _, err := f.db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
			status, request, created_at, updated_at) VALUES ($1::text::uuid, $2, $3, 'p', 'i-' || $1::text, 'k-' || $1::text, 'fp', 'unknown', NULLIF($4::text, '')::jsonb, $5, $5)`,
			id, f.tenant, string(kind), request, f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		return id
	}
	interactive := ops.Policy{RetryUncertain: true, NoProviderKey: true}
	want := map[string]ops.Policy{
		seed(ops.KindRefund, ""):                                     {RetryUncertain: true, HasLookup: true},
		seed(ops.KindLLMCall, `{"policy":"batch","body":{}}`):        {NoProviderKey: true},
		seed(ops.KindLLMCall, `{"policy":"interactive","body":{}}`):  interactive,
		seed(ops.KindLLMCall, ""):                                    interactive, // its bodies were purged
		seed(ops.KindLLMJob, `{"document_hash":"h","pipeline":"p"}`): {NoProviderKey: true},
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for id, pol := range want {
		op, err := f.db.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if op.Policy != pol {
			t.Errorf("%s %s: %+v, want %+v", op.Kind, op.Request, op.Policy, pol)
		}
	}
}
