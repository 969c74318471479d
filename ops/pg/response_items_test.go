package pg_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestResponseItemsAreFoundOnTheirIndex: the check of the items a Responses call names, which
// takes only an output item of the tenant's own responses (ops rule 12), probes
// operations_response_items_idx once per id, never reading every kept answer of the tenant,
// which a tenant could make grow to slow every such call down.
func TestResponseItemsAreFoundOnTheirIndex(t *testing.T) {
	plan := pgtest.PlanWithoutSeqScan(t, pgtest.New(t), pg.ResponseItemsSQL, pgx.NamedArgs{"tenant": 1, "ids": []string{"msg_1", "fc_2"}})
	if !strings.Contains(plan, "operations_response_items_idx") {
		t.Fatalf("the responses of output items are not found on their index:\n%s", plan)
	}
}

// TestResponseItemsAreTheTenantsOwnAnswers: an output item id is a tenant's only when the
// answer Settle keeps of one of its succeeded Responses calls holds it; another tenant asking
// for it finds nothing (ops rule 12). A chat completion takes no entry in the items' index,
// so the check costs the gateway's busiest route no write.
func TestResponseItemsAreTheTenantsOwnAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	closed := func(key, route, body string) *ops.Operation {
		t.Helper()
		in := ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: key, Fingerprint: "fp-" + key,
			Request: []byte(`{"policy":"interactive","route":"` + route + `","body":{"model":"m","input":"hi"}}`), Retention: 24 * time.Hour}
		o, err := f.seed().Open(ctx, in, "req-"+key, "gw")
		if err != nil {
			t.Fatal(err)
		}
		op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "gw", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
			Result: &ops.Result{ProviderRef: key, Body: []byte(body)}})
		if err != nil || op.Status != ops.StatusSucceeded {
			t.Fatalf("close %s: %v %v", key, op, err)
		}
		return op
	}
	resp := closed("resp_1", "/v1/responses", `{"id":"resp_1","object":"response","status":"completed","output":[{"id":"rs_1","type":"reasoning"},{"id":"msg_1","type":"message"}]}`)
	chat := closed("chatcmpl-1", "/v1/chat/completions", `{"id":"chatcmpl-1","object":"chat.completion","output":[{"id":"msg_chat"}]}`)
	if got, err := f.db.ResponseOutputItems(ctx, f.tenant, []string{"msg_1", "rs_1", "msg_chat", "msg_none"}); err != nil || !slices.Equal(sorted(got), []string{"msg_1", "rs_1"}) {
		t.Errorf("the tenant's own items: %v (%v), want msg_1 and rs_1", got, err)
	}
	var other int64
	if err := f.db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('other') RETURNING id`).Scan(&other); err != nil {
		t.Fatal(err)
	}
	if got, err := f.db.ResponseOutputItems(ctx, other, []string{"msg_1", "rs_1"}); err != nil || len(got) != 0 {
		t.Errorf("another tenant finds %v (%v) of acme's items, want none", got, err)
	}
	if !slices.Contains(f.indexesHolding(t, "operations", "id = '"+resp.ID+"'"), "operations_response_items_idx") {
		t.Error("a kept response's items are not in operations_response_items_idx")
	}
	if slices.Contains(f.indexesHolding(t, "operations", "id = '"+chat.ID+"'"), "operations_response_items_idx") {
		t.Error("a chat completion lands in operations_response_items_idx")
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestKeptItemsAreReadOnTheirIndexForTheTenantOnly: the output items a client hands back
// with the file ids the provider cited in them are compared with the items as Settle kept
// them (ops rule 12). They are read on operations_response_items_idx, as the check of the
// items' owner is, and only from the tenant's own answers: another tenant asking for them
// reads nothing.
func TestKeptItemsAreReadOnTheirIndexForTheTenantOnly(t *testing.T) {
	t.Parallel()
	plan := pgtest.PlanWithoutSeqScan(t, pgtest.New(t), pg.KeptItemsSQL, pgx.NamedArgs{"tenant": 1, "ids": []string{"msg_1", "fc_2"}})
	if !strings.Contains(plan, "operations_response_items_idx") {
		t.Fatalf("the kept output items are not read on their index:\n%s", plan)
	}
	f := newFixture(t)
	ctx := context.Background()
	in := ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: "resp_k", Fingerprint: "fp-k",
		Request: []byte(`{"policy":"interactive","route":"/v1/responses","body":{"model":"m","input":"hi"}}`), Retention: 24 * time.Hour}
	o, err := f.seed().Open(ctx, in, "req-k", "gw")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"id":"resp_k","object":"response","status":"completed","output":[{"id":"msg_k","type":"message","content":[` +
		`{"type":"output_text","text":"done","annotations":[{"type":"container_file_citation","file_id":"cfile_1"}]}]},{"id":"rs_k","type":"reasoning"}]}`
	if op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "gw", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
		Result: &ops.Result{ProviderRef: "resp_k", Body: []byte(body)}}); err != nil || op.Status != ops.StatusSucceeded {
		t.Fatalf("close: %v %v", op, err)
	}
	kept, err := f.db.KeptOutputItems(ctx, f.tenant, []string{"msg_k", "msg_none"})
	if err != nil || len(kept) != 1 || len(kept["msg_k"]) != 1 || !strings.Contains(string(kept["msg_k"][0]), `"file_id": "cfile_1"`) ||
		strings.Contains(string(kept["msg_k"][0]), "rs_k") {
		t.Errorf("the tenant's kept items: %q (%v), want msg_k alone, with its citation", kept, err)
	}
	var other int64
	if err := f.db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('other') RETURNING id`).Scan(&other); err != nil {
		t.Fatal(err)
	}
	if kept, err := f.db.KeptOutputItems(ctx, other, []string{"msg_k"}); err != nil || len(kept) != 0 {
		t.Errorf("another tenant reads %q (%v) of acme's kept items, want none", kept, err)
	}
}
