package web_test

import (
	"context"
	"strings"
	"testing"
)

// TestAPIBodiesAreReadByTheirExactNames attacks the API with bodies that Go's encoding/json
// would read differently from anything else that reads them: a key that differs from a
// field's name only in case (encoding/json matches names case-insensitively, Unicode folds
// included) and a key given twice (the last would win). A gateway or a reviewer sees
// amount_cents 100 where Settle would refund 3800, so each must be refused with a problem
// naming the field, change nothing and send nothing (ops rule 12), and be recorded as other
// refusals are.
func TestAPIBodiesAreReadByTheirExactNames(t *testing.T) {
	t.Parallel()
	t.Run("refunds", func(t *testing.T) {
		t.Parallel()
		e := newRefundEnv(t)
		auth := [2]string{"Authorization", "Bearer " + e.token}
		rest := `"order_id":"4417","currency":"usd","payment_intent":"pi_4417","reason":"requested_by_customer","request_ref":"toolu_names"`
		var cases []hostileCase
		for _, c := range []struct{ name, field, amounts string }{
			{"upper case after", "AMOUNT_CENTS", `"amount_cents":100,"AMOUNT_CENTS":3800`},
			{"upper case before", "Amount_Cents", `"Amount_Cents":3800,"amount_cents":100`},
			{"upper case alone", "AMOUNT_CENTS", `"AMOUNT_CENTS":3800`},
			{"long s folds to s", "amount_cents", `"amount_cents":100,"amount_centſ":3800`},
			{"repeated", "amount_cents", `"amount_cents":100,"amount_cents":3800`},
			{"repeated by escape", "amount_cents", `"amount_cents":100,"amount\u005fcents":3800`},
		} {
			cases = append(cases, hostileCase{name: c.name, field: c.field, path: "/api/v1/refunds",
				headers: [][2]string{auth}, body: "{" + c.amounts + "," + rest + "}"})
		}
		runHostile(t, e.db, e.url, cases)
		if calls := e.fake.Calls(); len(calls) != 0 {
			t.Errorf("Stripe was called %d times for refused bodies: %+v", len(calls), calls)
		}
		if n := e.count(t, `SELECT count(*) FROM client_requests WHERE answer = 'rejected'`); n != len(cases) {
			t.Errorf("%d refusals recorded for %d refused bodies", n, len(cases))
		}
	})
	t.Run("jobs", func(t *testing.T) {
		t.Parallel()
		e := newJobsEnv(t)
		auth := [2]string{"Authorization", "Bearer " + e.token}
		tail := `"prompt_version":"v1","model_profile":"fast","request_ref":"r"`
		var cases []hostileCase
		for i, c := range []struct{ name, field, body string }{
			{"nested case", "text", `{"document":{"text":"short","TEXT":"long"},"pipeline":"summarise",` + tail + `}`},
			{"nested repeated", "text", `{"document":{"text":"short","text":"long"},"pipeline":"summarise",` + tail + `}`},
			{"object case", "document", `{"document":{"text":"short"},"Document":{"text":"long"},"pipeline":"summarise",` + tail + `}`},
			{"repeated top", "pipeline", `{"document":{"text":"short"},"pipeline":"summarise","pipeline":"other",` + tail + `}`},
		} {
			key := [2]string{"Idempotency-Key", "names-" + strings.Repeat("k", i+1)}
			cases = append(cases, hostileCase{name: c.name, field: c.field, path: "/api/v1/jobs",
				headers: [][2]string{auth, key}, body: c.body})
		}
		runHostile(t, e.db, e.url, cases)
		var jobs int
		if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM jobs`).Scan(&jobs); err != nil {
			t.Fatal(err)
		}
		if jobs != 0 {
			t.Errorf("%d jobs made from refused bodies", jobs)
		}
	})
}
