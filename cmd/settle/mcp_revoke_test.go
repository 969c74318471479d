package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/refund"
)

// TestMCPStdioRefusesARevokedToken: an operator revokes the API token of a local agent
// whose 'settle mcp --stdio' is still running ("servers refuse it within 5 s"). From its
// next tool call on, every call is refused, says that it sent nothing, and neither refunds
// nor reads the tenant's refunds: the token is what names the tenant, and a call whose token
// no longer does is no tenant's request (ops rule 8), so it opens no operation.
func TestMCPStdioRefusesARevokedToken(t *testing.T) {
	t.Parallel()
	a := startStdioAgent(t)
	first := map[string]any{"order_id": "4417", "amount_cents": 3800, "currency": "usd", "payment_intent": "pi_4417"}
	if res, done, text := a.call(t, "issue_refund", first); res.IsError || done.Status != refund.Refunded {
		t.Fatalf("issue_refund before the revocation: %+v %q", done, text)
	}

	// The operator revokes the agent's token with the CLI while the agent keeps running.
	tokens, err := accountstore.New(a.db).Tokens(context.Background())
	if err != nil || len(tokens) != 1 {
		t.Fatalf("tokens %v, %v", tokens, err)
	}
	code, stdout, stderr := run(t, []string{"token", "revoke", "--id", strconv.FormatInt(tokens[0].ID, 10)}, map[string]string{"DATABASE_URL": a.url}, "")
	if code != 0 || !strings.Contains(stdout, "within 5 s") {
		t.Fatalf("token revoke: exit %d: %s%s", code, stdout, stderr)
	}

	var opID string
	if err := a.db.Pool.QueryRow(context.Background(), `SELECT id FROM operations`).Scan(&opID); err != nil {
		t.Fatal(err)
	}
	second := map[string]any{"order_id": "4418", "amount_cents": 5000, "currency": "usd", "payment_intent": "pi_4418"}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{{"issue_refund", second}, {"refund_status", map[string]any{"operation_id": opID}}} {
		res, ans, text := a.call(t, c.tool, c.args)
		if !res.IsError || ans.Status != "" || !strings.Contains(text, "revoked") || !strings.Contains(text, "sent nothing") {
			t.Errorf("%s after the revocation answered %q (%+v), want a refusal naming the revoked token", c.tool, text, ans)
		}
	}
	if n := len(a.fake.Refunds()); n != 1 {
		t.Errorf("%d refunds at the fake, want only the one made before the revocation", n)
	}
	if ops, requests := a.count(t, `SELECT count(*) FROM operations`), a.count(t, `SELECT count(*) FROM client_requests`); ops != 1 || requests != 1 {
		t.Errorf("%d operations and %d client requests after the revocation, want 1 and 1", ops, requests)
	}
}
