package alertstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/alerts"
)

// TestTheDuplicateRuleCountsTheAdmittedRequests: ops rule 8 makes the duplicate rate a
// counted fact, of the requests that asked for a paid side effect. From half an hour before
// the first pass to the second, a tenant's clients asked for 99 refunds, three a minute, and
// repeated every fifth (17 % of the admitted requests, past the page's 14.4 %), while 495
// requests were refused at the door and 99 cancels answered. Counting those in the
// denominator would put the rate at 2.8 % and page nobody about a client retrying in a
// loop; DuplicateRequestRateHigh pages.
func TestTheDuplicateRuleCountsTheAdmittedRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, q := range []string{`
INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint, amount_cents, currency,
	status, created_at, updated_at, closed_at)
SELECT gen_random_uuid(), @tenant::bigint, 'refund', 'stripe', 'dup-' || i, 'dup-' || i, 'fp', 100, 'usd', 'succeeded',
	@from::timestamptz + i * interval '20 seconds', @from::timestamptz + i * interval '20 seconds',
	@from::timestamptz + i * interval '20 seconds'
FROM generate_series(0, 98) i`, `
INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
SELECT o.tenant_id, o.id, o.kind, 'r', false, 'new', o.created_at FROM operations o WHERE o.intent_key LIKE 'dup-%'`, `
INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
SELECT o.tenant_id, o.id, o.kind, 'again', true, 'replayed', o.created_at + interval '1 second' FROM operations o
WHERE o.intent_key LIKE 'dup-%' AND right(o.intent_key, 1) IN ('0', '5')`, `
INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
SELECT @tenant::bigint, NULL, 'refund', 'bad-' || i, false, 'rejected', @from::timestamptz + i * interval '4 seconds'
FROM generate_series(0, 494) i`, `
INSERT INTO client_requests (tenant_id, operation_id, kind, request_ref, duplicate, answer, received_at)
SELECT o.tenant_id, o.id, o.kind, 'cancel', false, 'cancel_too_late', o.created_at + interval '2 seconds' FROM operations o
WHERE o.intent_key LIKE 'dup-%'`,
	} {
		if _, err := f.DB.Pool.Exec(ctx, q, pgx.NamedArgs{"tenant": f.Tenant, "from": t0.Add(-30 * time.Minute)}); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rig := newAlertRig(t, f, string(alerts.DefaultRulesYAML()), nil)
	rig.evaluate(t)
	f.Clock.Advance(3 * time.Minute) // past the rule's for: 2m
	rig.evaluate(t)
	got := firing(t, f, "DuplicateRequestRateHigh")
	if len(got) != 1 || got[0]["kind"] != "refund" || got[0]["severity"] != "page" {
		t.Fatalf("DuplicateRequestRateHigh firing for %v, want the page for the tenant's refunds", got)
	}
}
