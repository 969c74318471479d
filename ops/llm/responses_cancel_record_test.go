package llm_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
)

// cancelRecord is a client request as the ledger holds it.
type cancelRecord struct {
	tenant    int64
	operation string
	duplicate bool
	answer    string
}

// requestsOf lists the client requests recorded for tenant, oldest first.
func (w *gatewayWorld) requestsOf(t *testing.T, tenant string) []cancelRecord {
	t.Helper()
	rows, err := w.db.Pool.Query(context.Background(), `SELECT tenant_id, coalesce(operation_id::text, ''), duplicate,
	coalesce(answer, '') FROM client_requests WHERE tenant_id = $1 ORDER BY received_at, id`, w.tenants[tenant].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []cancelRecord
	for rows.Next() {
		var r cancelRecord
		if err := rows.Scan(&r.tenant, &r.operation, &r.duplicate, &r.answer); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// createQueued creates a background response for shop under key that the provider keeps
// queued for a few seconds, and returns its id once the create has answered.
func (w *gatewayWorld) createQueued(t *testing.T, key string) string {
	t.Helper()
	w.fake.AddFault(fake.LLMFault{Path: "/v1/responses", Kind: fake.LLMFaultBillThenTimeout, Delay: 3 * time.Second, Times: 1})
	body := `{"model":"fake-small","input":"draft the reply to ticket 61","max_output_tokens":24,"background":true}`
	first := make(chan []byte, 1)
	followed := make(chan error, 1)
	go func() {
		created := &reply{written: func(p []byte) {
			select {
			case first <- append([]byte(nil), p...):
			default:
			}
		}}
		_, err := w.callInto(created, w.gw, "/v1/responses", "shop", key, body, "")
		followed <- err
	}()
	t.Cleanup(func() { <-followed })
	var r struct {
		ID string `json:"id"`
	}
	select {
	case answer := <-first:
		if err := json.Unmarshal(answer, &r); err != nil || r.ID == "" {
			t.Fatalf("created %s: %v", answer, err)
		}
	case err := <-followed:
		t.Fatalf("the create call ended without an answer: %v", err)
	}
	return r.ID
}

// TestACancelIsRecordedAsItsTenantsRequest: ops rule 8 records every client request, and a
// cancel of a background response is one. It is recorded once, as its tenant's request on
// the response's operation, answered with what the provider did (cancelled); it is neither
// a duplicate of the create (the operation counts no duplicate request) nor a new intent
// (only the create is answered new), and it begins no attempt of the operation, so the
// duplicate and timeout rates stay those of the calls.
func TestACancelIsRecordedAsItsTenantsRequest(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{chunkDelay: 25 * time.Millisecond})
	id := w.createQueued(t, "rec-cancel")
	out := &reply{}
	if err := w.gw.Cancel(context.Background(), llm.Cancellation{Tenant: w.tenants["shop"], ID: id}, out); err != nil {
		t.Fatalf("the tenant's cancel: %v", err)
	}
	op := w.waitStatus(t, "rec-cancel", ops.StatusFailed)
	got := w.requestsOf(t, "shop")
	want := []cancelRecord{{w.tenants["shop"].ID, op.ID, false, string(ops.AnswerNew)},
		{w.tenants["shop"].ID, op.ID, false, string(ops.AnswerCancelled)}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("recorded %+v; want the create and the cancel %+v", got, want)
	}
	if n := w.count(t, `SELECT duplicate_requests FROM operations WHERE id = $1`, op.ID); n != 0 {
		t.Fatalf("the cancel counted as %d duplicate requests of the create", n)
	}
	if n := w.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1`, op.ID); n != 1 {
		t.Fatalf("the operation has %d attempts after its cancel, want the create's 1", n)
	}
}

// TestARefusedCancelIsRecorded: ops rule 8 records a refused request as its tenant's too. A
// cancel Settle refuses (another tenant's response, an id no call created, a malformed id)
// is recorded once as the canceller's refused request, naming no operation: not the other
// tenant's, whose page must not show it. A cancel the provider refuses because the
// response had ended is recorded on the response's operation as too late.
func TestARefusedCancelIsRecorded(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{chunkDelay: 25 * time.Millisecond})
	ctx := context.Background()
	created, err := w.callOn(w.gw, "/v1/responses", "shop", "rec-done", `{"model":"fake-small","input":"where is order 4460?","max_output_tokens":16}`, "")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(created.body.Bytes(), &r); err != nil || r.ID == "" {
		t.Fatalf("created %s: %v", created.body.String(), err)
	}
	op := w.waitStatus(t, "rec-done", ops.StatusSucceeded)
	bank, shop := w.tenants["bank"], w.tenants["shop"]
	for _, c := range []struct {
		tenant *ops.Tenant
		id     string
		code   string
	}{{bank, r.ID, ops.ENOTFOUND}, {shop, "resp_none", ops.ENOTFOUND}, {shop, "resp_\x00" + strings.Repeat("x", 300), ops.EINVALID}} {
		if err := w.gw.Cancel(ctx, llm.Cancellation{Tenant: c.tenant, ID: c.id}, &reply{}); ops.ErrorCode(err) != c.code {
			t.Fatalf("cancel of %.20q by tenant %d: %v, want %s", c.id, c.tenant.ID, err, c.code)
		}
	}
	if err := w.gw.Cancel(ctx, llm.Cancellation{Tenant: shop, ID: r.ID}, &reply{}); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("cancel of a response that ended: %v", err)
	}
	refused := cancelRecord{shop.ID, "", false, string(ops.AnswerCancelRefused)}
	want := map[string][]cancelRecord{
		"bank": {{bank.ID, "", false, string(ops.AnswerCancelRefused)}},
		"shop": {{shop.ID, op.ID, false, string(ops.AnswerNew)}, refused, refused,
			{shop.ID, op.ID, false, string(ops.AnswerCancelTooLate)}},
	}
	for name, rows := range want {
		got := w.requestsOf(t, name)
		if len(got) != len(rows) {
			t.Fatalf("%s's requests: %+v; want %+v", name, got, rows)
		}
		for i := range rows {
			if got[i] != rows[i] {
				t.Fatalf("%s's requests: %+v; want %+v", name, got, rows)
			}
		}
	}
	if n := w.count(t, `SELECT duplicate_requests FROM operations WHERE id = $1`, op.ID); n != 0 {
		t.Fatalf("the cancels counted as %d duplicate requests of the create", n)
	}
}

// TestACancelTheProviderNeverAnsweredIsRecorded: ops rule 8 records a cancel whatever the
// provider did with it. One sent while the provider cannot be reached is recorded on the
// response's operation as failed, and its client is told the provider could not be asked;
// it is not recorded as refused, which would say the provider had answered.
func TestACancelTheProviderNeverAnsweredIsRecorded(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	created, err := w.callOn(w.gw, "/v1/responses", "shop", "rec-down", `{"model":"fake-small","input":"where is order 4470?","max_output_tokens":16}`, "")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(created.body.Bytes(), &r); err != nil || r.ID == "" {
		t.Fatalf("created %s: %v", created.body.String(), err)
	}
	op := w.waitStatus(t, "rec-down", ops.StatusSucceeded)
	w.fake.Close()
	err = w.gw.Cancel(context.Background(), llm.Cancellation{Tenant: w.tenants["shop"], ID: r.ID}, &reply{})
	if ops.ErrorCode(err) != ops.EUNAVAILABLE {
		t.Fatalf("cancel while the provider is down: %v", err)
	}
	shop := w.tenants["shop"].ID
	got := w.requestsOf(t, "shop")
	want := []cancelRecord{{shop, op.ID, false, string(ops.AnswerNew)}, {shop, op.ID, false, string(ops.AnswerCancelFailed)}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("recorded %+v; want %+v", got, want)
	}
}

// TestACancelWithAMalformedRequestRefIsRefusedRecorded: bad input gets a clear error and
// changes nothing, and ops rule 8 records the refusal. A create whose request reference is
// malformed (a NUL byte, or over the limit) is refused 400 before anything is sent; a
// cancel carrying one was sent all the same, its reference silently dropped. It is refused
// as the create is, recorded once as the tenant's refused cancel naming no operation, and
// the provider is never asked: the response runs on.
func TestACancelWithAMalformedRequestRefIsRefusedRecorded(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{chunkDelay: 25 * time.Millisecond})
	id := w.createQueued(t, "rec-bad-ref")
	shop := w.tenants["shop"]
	for _, ref := range []string{"ticket\x0061", strings.Repeat("r", ops.MaxRefBytes+1)} {
		err := w.gw.Cancel(context.Background(), llm.Cancellation{Tenant: shop, ID: id, RequestRef: ref, RequestRefFrom: "X-Request-Ref"}, &reply{})
		if ops.ErrorCode(err) != ops.EINVALID || !strings.Contains(err.Error(), "X-Request-Ref") {
			t.Fatalf("cancel with request reference %.20q: %v; want a refusal naming X-Request-Ref", ref, err)
		}
	}
	op := w.waitStatus(t, "rec-bad-ref", ops.StatusSucceeded)
	refused := cancelRecord{shop.ID, "", false, string(ops.AnswerCancelRefused)}
	got := w.requestsOf(t, "shop")
	want := []cancelRecord{{shop.ID, op.ID, false, string(ops.AnswerNew)}, refused, refused}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("recorded %+v; want the create and two refused cancels %+v", got, want)
	}
}
