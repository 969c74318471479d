package web_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

// ¥500 reads the same on the operations queue and on the reconciliation exceptions.
func TestMoneyReadsTheSameOnEveryPage(t *testing.T) {
	t.Parallel()
	e := newReconEnv(t)
	ctx := context.Background()
	var tenant int64
	if err := e.db.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('tokyo') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	op := &ops.Operation{ID: ops.NewOperationID(), TenantID: tenant, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: "ord_yen", ProviderKey: ops.NewProviderKey(), Fingerprint: "fp-yen", OrderRef: "ord_yen", AmountCents: 500, Currency: "jpy"}
	if _, err := e.db.Open(ctx, ops.OpenParams{Op: op, Now: t0.Add(-time.Hour), Claim: "worker-1", LeaseUntil: t0.Add(-59 * time.Minute), Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reconstore.New(e.db).RecordFinding(ctx, recon.Finding{Kind: recon.ExceptionDoubleCharge, Provider: "stripe", Ref: op.ID, TenantID: tenant,
		OperationID: op.ID, ChargeRefs: []string{"re_a", "re_b"}, AmountCents: 500, Currency: "jpy",
		Summary: "Operation charged twice.", Actor: "stripe reconciliation", At: t0}); err != nil {
		t.Fatal(err)
	}
	c := signIn(t, e, "oncall@example.com", desk.RoleOncall)
	cell := func(path, testid string) string {
		t.Helper()
		r, body := e.get(t, c, path)
		m := regexp.MustCompile(`data-testid="` + testid + `"[^>]*>([^<]*)<`).FindStringSubmatch(body)
		if r.StatusCode != http.StatusOK || m == nil {
			t.Fatalf("GET %s = %d without %s\n%s", path, r.StatusCode, testid, body)
		}
		return strings.TrimSpace(m[1])
	}
	queue, exception := cell("/ops?tab=in_progress", "queue-amount"), cell("/reconcile/exceptions", "exception-amount")
	if queue != "500 JPY" || exception != "500 JPY" {
		t.Errorf("¥500 shows as %q on /ops and %q on /reconcile/exceptions; want 500 JPY on both", queue, exception)
	}
}
