package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/retainstore"
	"github.com/settle-dev/settle/ops/retain"
)

// TestADrillDownSaysWhatItCanNoLongerList: ops rule 8 keeps a bucket's figures as counted
// facts after the retention removed the rows behind them (the rollups keep them), and
// ops rule 12 lets no answer say more than Settle knows. So the drill-down behind a figure of 3
// whose rows are gone does not answer "No rows." as if none were ever recorded: it says the
// table counts 3, that none of them can still be listed, and why.
func TestADrillDownSaysWhatItCanNoLongerList(t *testing.T) {
	t.Parallel()
	e := newReconEnv(t)
	_, tenant := seedRecon(t, e)
	clock := ops.NewManualClock(t0.Add(20 * 24 * time.Hour))
	r := &retain.Retention{Store: retainstore.New(e.db), Clock: clock, Keep: 8 * 24 * time.Hour, Actor: "retention:test"}
	if rep, err := r.RunOnce(context.Background(), false); err != nil || rep.Operations != 1 || rep.ClientRequests != 3 {
		t.Fatalf("retention: %+v %v; want the refund and its three requests removed", rep, err)
	}
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	q := url.Values{"at": {t0.Add(-time.Hour).Format(time.RFC3339)}, "width": {"1h0m0s"}, "tenant": {itoa(tenant)},
		"kind": {"refund"}, "provider": {"stripe"}, "api": {""}, "measure": {"client_requests"}}
	_, body := e.get(t, c, "/reconcile/drill?"+q.Encode())
	if !strings.Contains(body, `data-testid="drill-gap"`) || !strings.Contains(body, "counts 3") ||
		!strings.Contains(body, "0 of them") || !strings.Contains(body, "retention") {
		t.Fatalf("the drill-down of a figure of 3 whose rows the retention removed should say so\n%s", body)
	}
	if strings.Contains(body, `data-testid="drill-empty"`) {
		t.Errorf("the drill-down says there are no rows behind a figure of 3\n%s", body)
	}
}
