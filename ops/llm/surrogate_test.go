package llm_test

import (
	"testing"

	"github.com/settle-dev/settle/ops"
)

// TestLoneSurrogateInARequestIsTheClientsError: JSON may escape half a UTF-16 pair
// ("\ud800"), which Go decodes to U+FFFD but PostgreSQL's jsonb refuses. A request holding
// one is refused 400 before anything is opened or sent, naming the field, never answered
// 500 by the database's refusal (ops rule 8: it is recorded as rejected).
func TestLoneSurrogateInARequestIsTheClientsError(t *testing.T) {
	w := newGatewayWorld(t, gatewaySetup{})
	body := `{"model":"fake-small","messages":[{"role":"user","content":"half an emoji \ud83d"}]}`
	r, err := w.call("shop", "lone-surrogate", body)
	wantRefused(t, r, err, ops.EINVALID, ops.ReasonInvalidField)
	if n := w.count(t, `SELECT count(*) FROM operations WHERE intent_key = 'lone-surrogate'`); n != 0 {
		t.Fatalf("%d operations opened for a refused request", n)
	}
	w.generations(t, 0)
}
