package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// TestPurgedCallKeepsItsStoreOptOut: an llm_call whose client sent store: false keeps the
// opt-out on its row from its opening, so once the purge deleted the request that said so it
// is still known to have none stored at the provider, and no lookup is promised or run for
// it (ops rule 12); a call that sent store: true, or nothing, has not opted out.
func TestPurgedCallKeepsItsStoreOptOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	open := func(key, store string) *ops.Operation {
		t.Helper()
		body := `{"model":"gpt-4o-mini"` + store + `,"messages":[]}`
		in := ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: key, Fingerprint: "fp-" + key,
			Request: []byte(`{"policy":"interactive","route":"/v1/chat/completions","body":` + body + `}`), Retention: 24 * time.Hour}
		o, err := f.seed().Open(ctx, in, "req-"+key, "gw")
		if err != nil {
			t.Fatal(err)
		}
		if o.Op.StoreOptedOut != (store == `,"store":false`) {
			t.Fatalf("%s: opened with store_opted_out %v", key, o.Op.StoreOptedOut)
		}
		op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "gw", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
			Result: &ops.Result{ProviderRef: "chatcmpl-" + key, Body: []byte(`{"id":"chatcmpl-` + key + `"}`)}})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	want := map[string]bool{
		open("k-false", `,"store":false`).ID: true,
		open("k-true", `,"store":true`).ID:   false,
		open("k-none", ``).ID:                false,
	}
	f.purgeAll(t, len(want))
	for id, opted := range want {
		got, err := f.db.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Request) != 0 || got.PurgedAt == nil {
			t.Fatalf("the purge left a request of %d bytes", len(got.Request))
		}
		if got.StoreOptedOut != opted || llm.OptedOut(got) != opted {
			t.Errorf("operation %s after the purge: opted out %v (read %v), want %v", id, got.StoreOptedOut, llm.OptedOut(got), opted)
		}
	}
}

// TestStoreOptOutMigrationTakesTheRequests: migration 00057 marks every operation whose
// stored request's body sent store: false as opted out of the provider's store; one that
// sent store: true or nothing, a refund, and a call whose request was purged before the
// migration are not. Going down drops the column and leaves the operations.
func TestStoreOptOutMigrationTakesTheRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if err := f.db.MigrateDownTo(ctx, 56); err != nil {
		t.Fatal(err)
	}
	seed := func(kind, request string) string {
		t.Helper()
		id := ops.NewOperationID()
		if _, err := f.db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, status, request, created_at, updated_at)
			VALUES ($1::text::uuid, $2, $3, 'openai', 'i-' || $1::text, 'k-' || $1::text, 'fp', 'unknown', NULLIF($4::text, '')::jsonb, $5, $5)`,
			id, f.tenant, kind, request, t0); err != nil {
			t.Fatal(err)
		}
		return id
	}
	want := map[string]bool{
		seed("llm_call", `{"route":"/v1/chat/completions","body":{"model":"m","store":false}}`): true,
		seed("llm_call", `{"route":"/v1/responses","body":{"model":"m","store":false}}`):        true,
		seed("llm_call", `{"route":"/v1/chat/completions","body":{"model":"m","store":true}}`):  false,
		seed("llm_call", `{"route":"/v1/responses","body":{"model":"m","store":"false"}}`):      false,
		seed("llm_call", `{"route":"/v1/chat/completions","body":{"model":"m"}}`):               false,
		seed("llm_call", ""):              false,
		seed("refund", `{"order":"o-1"}`): false,
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for id, opted := range want {
		var got bool
		if err := f.db.Pool.QueryRow(ctx, `SELECT store_opted_out FROM operations WHERE id = $1::text::uuid`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != opted {
			t.Errorf("operation %s: store_opted_out %v, want %v", id, got, opted)
		}
	}
	if err := f.db.MigrateDownTo(ctx, 56); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, `SELECT count(*) FROM operations`); n != len(want) {
		t.Fatalf("%d operations after going down, want %d", n, len(want))
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}
