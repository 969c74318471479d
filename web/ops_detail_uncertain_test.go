package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
)

// TestOpDetailKeyPanelNamesAnEarlierUncertainAttempt opens the page of an llm_job operation
// whose attempt 1 timed out and whose attempt 2 got a 429: the 429 is the provider's last
// answer, but the panel does not let it stand for the operation, since attempt 1 may have
// been generated and billed (ops rule 12).
func TestOpDetailKeyPanelNamesAnEarlierUncertainAttempt(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	ctx := context.Background()
	resend := ops.Policy{RetryUncertain: true, NoProviderKey: true}
	o, err := e.seed().Open(ctx, ops.Intent{TenantID: e.tenant.ID, Kind: ops.KindLLMJob, Provider: "openai",
		IntentKey: "dedup-429", Fingerprint: "fp-429", Policy: &resend}, "req-429", "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := e.seed().Finish(ctx, o.Op, o.Attempt, "worker-1",
		ops.AttemptResult{Outcome: ops.OutcomeTimeout, ErrorCode: "upstream_timeout"})
	if err != nil {
		t.Fatal(err)
	}
	op, a, err := e.seed().BeginAttempt(ctx, op, "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err = e.seed().Finish(ctx, op, a, "worker-1",
		ops.AttemptResult{Outcome: ops.OutcomeRateLimited, HTTPStatus: 429, PossibleDuplicate: true}); err != nil {
		t.Fatal(err)
	}
	c := e.signIn(t, "oncall@example.com", desk.RoleOncall)
	code, body := e.page(t, c, "/ops/"+op.ID)
	if code != 200 {
		t.Fatalf("detail = %d", code)
	}
	if strings.Contains(body, "the provider answered HTTP 429 to attempt 2.") {
		t.Fatalf("the key panel lets the 429 stand for the operation:\n%s", body)
	}
	mustContain(t, body, `data-testid="op-retention"`, "2 attempts were sent", "the provider answered HTTP 429 to attempt 2",
		"attempt 1 ended timeout: it may have been generated")
}
