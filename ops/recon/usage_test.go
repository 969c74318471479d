package recon_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
)

// usageReport is an LLM provider's usage report held in memory.
type usageReport struct {
	name  string
	rows  []recon.UsageRow
	calls int
}

func (u *usageReport) Name() string { return u.name }

func (u *usageReport) Usage(_ context.Context, w recon.Window, width time.Duration) ([]recon.UsageRow, error) {
	u.calls++
	var out []recon.UsageRow
	for _, r := range u.rows {
		if !r.Start.Before(w.From) && r.Start.Before(w.To) && r.Width == width {
			out = append(out, r)
		}
	}
	return out, nil
}

// llmOp records an LLM call operation with one attempt per outcome, started at at.
func (w *world) llmOp(t *testing.T, at time.Time, model string, outcomes ...ops.Outcome) {
	t.Helper()
	ctx := context.Background()
	id := ops.NewOperationID()
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	request, api, model, status, version, attempts, created_at, updated_at, closed_at)
VALUES ($1::uuid, $2, 'llm_call', 'fakellm', $1::text, $1::text, 'fp', $3, 'chat_completions', $6, 'succeeded', 3, $4, $5, $5, $5)`,
		id, w.tenant, fmt.Sprintf(`{"route": "/v1/chat/completions", "body": {"model": %q}}`, model), len(outcomes), at, model); err != nil {
		t.Fatal(err)
	}
	for i, o := range outcomes {
		if _, err := w.db.Pool.Exec(ctx, `INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, finished_at, outcome)
VALUES ($1::uuid, $2, $1::text, 'gw', $3, $3, $4)`, id, i+1, at.Add(time.Duration(i)*time.Second), string(o)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLLMUsageIsComparedWithAttemptsSent(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	// Half past: the last whole hour has been over long enough for its report to be complete.
	w.clock.Set(w.clock.Now().Truncate(time.Hour).Add(30 * time.Minute))
	b0 := w.clock.Now().Truncate(time.Hour).Add(-3 * time.Hour)
	b1, b2 := b0.Add(time.Hour), b0.Add(2*time.Hour)
	ok, timeout, limited := ops.OutcomeOK, ops.OutcomeTimeout, ops.OutcomeRateLimited
	// b0: four answered calls, one of them after a timeout that the provider billed too.
	for i := range 3 {
		w.llmOp(t, b0.Add(time.Duration(i)*time.Minute), "m1", ok)
	}
	w.llmOp(t, b0.Add(10*time.Minute), "m1", timeout, ok)
	// b1: in order; a 429 is not billed.
	w.llmOp(t, b1.Add(time.Minute), "m1", ok)
	w.llmOp(t, b1.Add(2*time.Minute), "m2", limited, ok)
	// b2: one call, but four billed: someone else spends on our key.
	w.llmOp(t, b2.Add(time.Minute), "m1", ok)
	report := &usageReport{name: "fakellm", rows: []recon.UsageRow{
		{Start: b0, Width: time.Hour, APIKeyID: "key_a", Model: "m1", Requests: 5},
		{Start: b1, Width: time.Hour, APIKeyID: "key_a", Model: "m1", Requests: 1},
		{Start: b1, Width: time.Hour, APIKeyID: "key_a", Model: "m2", Requests: 1},
		{Start: b2, Width: time.Hour, APIKeyID: "key_a", Model: "m1", Requests: 4},
	}}
	w.recon.Usage = []recon.UsageSource{report}
	win := recon.Window{From: b0, To: w.clock.Now()}

	rep, err := w.recon.Reconcile(ctx, "fakellm", win)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Buckets != 3 || rep.Billed != 11 || rep.Answered != 7 || rep.UsageMismatch != 2 || rep.NewExceptions != 2 || rep.NewUsageRows != 4 {
		t.Fatalf("run: %s", rep.Summary())
	}
	sev := map[string]string{}
	rows, _ := w.db.Pool.Query(ctx, `SELECT ref, severity FROM recon_exceptions WHERE kind = 'usage_mismatch'`)
	for rows.Next() {
		var ref, s string
		_ = rows.Scan(&ref, &s)
		sev[ref] = s
	}
	ref := func(b time.Time) string { return b.Format(time.RFC3339) + "/1h0m0s" }
	if sev[ref(b0)] != "low" || sev[ref(b2)] != "high" || len(sev) != 2 {
		t.Fatalf("usage exceptions %v, want b0 low and b2 high", sev)
	}
	again, err := w.recon.Reconcile(ctx, "fakellm", win)
	if err != nil || again.NewExceptions != 0 || again.NewUsageRows != 0 || again.UsageRows != 4 {
		t.Fatalf("second run: %s (%v)", again.Summary(), err)
	}
	if n := w.count(t, `SELECT count(*) FROM llm_usage`); n != 4 {
		t.Fatalf("%d usage rows stored, want 4", n)
	}
}
