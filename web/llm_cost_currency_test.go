package web_test

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
)

// TestAnLLMCallsCostIsShownInItsPriceTablesCurrency: a price table may be in euros, and the
// call's usage record names the currency its cost was priced in. The queue and the
// operation's page show the cost in that currency; shown as dollars, a euro cost would say
// more than Settle knows (ops rule 12).
func TestAnLLMCallsCostIsShownInItsPriceTablesCurrency(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	op := e.llmCallOn(t, "/v1/chat/completions", "gpt-4o-mini", 1234)
	if _, err := e.db.Pool.Exec(context.Background(), `UPDATE operations SET usage = '{"model":"gpt-4o-mini","currency":"eur"}' WHERE id = $1`,
		op.ID); err != nil {
		t.Fatal(err)
	}
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	_, body := e.page(t, c, "/ops?status=unknown")
	row := between(t, body, `data-id="`+op.ID+`"`, `</tr>`)
	mustContain(t, row, `data-testid="queue-amount">0.001234 EUR<`)
	_, body = e.page(t, c, "/ops/"+op.ID)
	mustContain(t, body, `data-testid="op-cost">0.001234 EUR<`)
}
