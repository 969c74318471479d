package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/purgestore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

// llmCall opens an llm_call through the ledger with the request the gateway stores for route
// and model (its route beside the client's body) and settles it with an answer.
func (f *fixture) llmCall(t *testing.T, key, route, model string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	in := ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: key, Fingerprint: "fp-" + key,
		Request:   []byte(`{"policy":"interactive","route":"` + route + `","body":{"model":"` + model + `","input":"hi"}}`),
		Retention: 24 * time.Hour}
	o, err := f.seed().Open(ctx, in, "req-"+key, "gw")
	if err != nil {
		t.Fatal(err)
	}
	op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "gw", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
		Result: &ops.Result{ProviderRef: "resp_" + key, Body: []byte(`{"id":"resp_` + key + `"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != ops.StatusSucceeded {
		t.Fatalf("status %s, want succeeded", op.Status)
	}
	return op
}

// purgeAll runs the body purge far enough past t0 that every call opened at t0 is due.
func (f *fixture) purgeAll(t *testing.T, want int) {
	t.Helper()
	rep, err := (&llm.Purger{Store: purgestore.New(f.db), Clock: ops.NewManualClock(t0.Add(30 * 24 * time.Hour)), Keep: llm.DefaultBodyKeep,
		JobTTL: 24 * time.Hour, Batch: 10}).RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Operations != want {
		t.Fatalf("purged %d operations, want %d", rep.Operations, want)
	}
}

// TestSentToLLMNamesEachRowsModelAndRoute: the usage comparison's per-model breakdown names
// the model each call asked for, read where the gateway keeps it (the body beside the
// route), and the route its report is chosen by; both outlive the purge of the request.
func TestSentToLLMNamesEachRowsModelAndRoute(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.llmCall(t, "k-resp", "/v1/responses", "gpt-4.1-mini")
	f.llmCall(t, "k-chat", "/v1/chat/completions", "gpt-4o-mini")
	w := recon.Window{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}
	check := func(when string) {
		t.Helper()
		rows, err := reconstore.New(f.db).SentToLLM(context.Background(), "openai", w, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range rows {
			got[r.Route] = r.Model
			if r.Sent != 1 || r.OK != 1 {
				t.Errorf("%s: %s %s sent %d ok %d, want 1 and 1", when, r.Route, r.Model, r.Sent, r.OK)
			}
		}
		if len(rows) != 2 || got["/v1/responses"] != "gpt-4.1-mini" || got["/v1/chat/completions"] != "gpt-4o-mini" {
			t.Fatalf("%s: rows %+v, want one per route with its model", when, rows)
		}
	}
	check("before the purge")
	f.purgeAll(t, 2)
	check("after the purge")
}

// TestPurgedCallKeepsItsAPIAndModel: an operation read back after the purge deleted its
// request still names the API it called and the model it asked for, so its page and its
// queue row say what they said before.
func TestPurgedCallKeepsItsAPIAndModel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.llmCall(t, "k-msg", "/v1/messages", "claude-sonnet-4-5")
	f.purgeAll(t, 1)
	got, err := f.db.Get(context.Background(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Request) != 0 || got.PurgedAt == nil {
		t.Fatalf("the purge left a request of %d bytes", len(got.Request))
	}
	if c := llm.CallOf(got); c.API != "messages" || c.Model != "claude-sonnet-4-5" {
		t.Fatalf("a purged call reads as %+v, want messages with claude-sonnet-4-5", c)
	}
}

// TestOperationModelMigrationTakesTheRequestsModel: migration 00056 gives every LLM operation
// the model its stored request's body names, as the gateway and the pipeline jobs keep it; a
// refund, and a call whose request was purged before the migration, name none. Going down
// drops the column and leaves the operations.
func TestOperationModelMigrationTakesTheRequestsModel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if err := f.db.MigrateDownTo(ctx, 55); err != nil {
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
	want := map[string]string{
		seed("llm_call", `{"route":"/v1/responses","body":{"model":"gpt-4.1-mini"}}`):    "gpt-4.1-mini",
		seed("llm_job", `{"pipeline":"p","body":{"model":"gpt-4o-mini","messages":[]}}`): "gpt-4o-mini",
		seed("llm_call", `{"route":"/v1/messages","body":{}}`):                           "",
		seed("llm_call", ""):              "",
		seed("refund", `{"order":"o-1"}`): "",
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for id, model := range want {
		var got string
		if err := f.db.Pool.QueryRow(ctx, `SELECT model FROM operations WHERE id = $1::text::uuid`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != model {
			t.Errorf("operation %s: model %q, want %q", id, got, model)
		}
	}
	if err := f.db.MigrateDownTo(ctx, 55); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, `SELECT count(*) FROM operations`); n != len(want) {
		t.Fatalf("%d operations after going down, want %d", n, len(want))
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}
