package main

import (
	"context"
	"strings"
	"testing"
)

// TestTenantCommandsShowTheFiguresTheRefusalsShow is the attack of a listing that rounds to
// the cent what the budget's refusals show with six decimals: a tenant that spent 0.0869 of
// a budget of 0.09 a day was listed "0.09 USD/day  0.09 USD", as if its budget were spent
// while its calls that fit still went through, and a budget of 12.345678 was set and listed
// as 12.35 USD. Both commands show an amount the cent cannot hold with its six decimals, as
// the refusals do. ops rule 12: no answer says more than Settle knows.
func TestTenantCommandsShowTheFiguresTheRefusalsShow(t *testing.T) {
	t.Parallel()
	vars, db := tenantShop(t)
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key,
	fingerprint, amount_cents, currency, cost_micros, usage, status, created_at, updated_at, closed_at)
SELECT id, (SELECT id FROM tenants WHERE name = 'shop'), 'llm_call', 'fakellm', id::text, id::text, 'fp', 0, '', 86900,
	'{"cost_micros": 86900}', 'succeeded', now(), now(), now()
FROM (SELECT gen_random_uuid() AS id) c`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ budget, said, listed string }{
		{"0.09", "an LLM budget of 0.09 USD a UTC day", "0.09 USD/day  0.086900 USD"},
		{"12.345678", "an LLM budget of 12.345678 USD a UTC day", "12.345678 USD/day  0.086900 USD"},
	} {
		code, stdout, stderr := run(t, []string{"tenant", "budget", "shop", "--budget", c.budget}, vars, "")
		if code != 0 || !strings.Contains(stdout, c.said) {
			t.Errorf("tenant budget --budget %s: exit %d, %q %q; want %q", c.budget, code, stdout, stderr, c.said)
		}
		if code, stdout, stderr := run(t, []string{"tenant", "list"}, vars, ""); code != 0 || !strings.Contains(stdout, c.listed) {
			t.Errorf("tenant list with a budget of %s: exit %d, %q\n%s; want %q", c.budget, code, stderr, stdout, c.listed)
		}
	}
}
