package recon_test

import (
	"context"
	"fmt"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
)

// promptReport is a usage report held in memory that counts prompt tokens per minute, as
// Anthropic's does.
type promptReport struct{ usageReport }

func (*promptReport) PromptBuckets() time.Duration { return time.Minute }

// sent is one attempt of a Messages call: its outcome, and its prompt's size as its answer
// gave it (0: no answer).
type sent struct {
	outcome ops.Outcome
	prompt  int
}

// messagesOp records a Messages call of the provider "anthropic" that asked for model, with
// its attempts a second apart from at, and returns its id. The operation's usage is its
// answered attempt's, as the gateway stores it.
func (w *world) messagesOp(t *testing.T, at time.Time, model string, status ops.Status, attempts ...sent) string {
	t.Helper()
	ctx := context.Background()
	id := ops.NewOperationID()
	usage := func(prompt int) any {
		if prompt == 0 {
			return nil
		}
		return fmt.Sprintf(`{"model": %q, "prompt_tokens": %d, "completion_tokens": 40}`, model+"-20250929", prompt)
	}
	var opUsage any
	for _, a := range attempts {
		if a.outcome == ops.OutcomeOK {
			opUsage = usage(a.prompt)
		}
	}
	var closed any
	if status == ops.StatusSucceeded || status == ops.StatusFailed {
		closed = at
	}
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO operations (id, tenant_id, kind, provider, intent_key, provider_key, fingerprint,
	request, api, model, status, version, attempts, usage, created_at, updated_at, closed_at)
VALUES ($1::uuid, $2, 'llm_call', 'anthropic', $1::text, $1::text, 'fp', $3, 'messages', $9, $4, 3, $5, $6::jsonb, $7, $7, $8)`,
		id, w.tenant, fmt.Sprintf(`{"route": "/v1/messages", "body": {"model": %q}}`, model), string(status), len(attempts), opUsage, at, closed,
		model); err != nil {
		t.Fatal(err)
	}
	for i, a := range attempts {
		var u any
		if a.outcome == ops.OutcomeOK {
			u = usage(a.prompt)
		}
		if _, err := w.db.Pool.Exec(ctx, `INSERT INTO attempts (operation_id, n, provider_key, owner, started_at, finished_at, outcome, usage)
VALUES ($1::uuid, $2, $1::text, 'gw', $3, $3, $4, $5::jsonb)`, id, i+1, at.Add(time.Duration(i)*time.Second), string(a.outcome), u); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// TestPromptReportIsComparedMinuteByMinute: a report that counts prompt tokens, not requests,
// is compared minute by minute and model by model with the prompts of the attempts sent,
// under the model's name whether the call asked for an alias or the report names a dated
// snapshot. A minute billed the prompts of its answered attempts is in order, a 429 bills
// nothing, and so is a call the report counts in the minute after its attempt. Beyond them:
// the prompt of a resent call's first attempt billed is a call billed twice (low, naming the
// operation, ops rule 3), in its minute or, counted in the next one, in the two minutes; tokens no attempt sent are high; tokens missing are medium. Nothing
// is closed, and a second run finds nothing new.
func TestPromptReportIsComparedMinuteByMinute(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	m0 := w.clock.Now().Truncate(time.Hour).Add(-time.Hour)
	w.clock.Set(m0.Add(30 * time.Minute))
	minute := func(n int) time.Time { return m0.Add(time.Duration(n) * time.Minute) }
	ok, timeout, limited := ops.OutcomeOK, ops.OutcomeTimeout, ops.OutcomeRateLimited
	const sonnet, haiku = "claude-sonnet-4-5", "claude-haiku-4-5"
	// 0: in order, a 429 included; another model beside it.
	w.messagesOp(t, minute(0), sonnet, ops.StatusSucceeded, sent{ok, 100})
	w.messagesOp(t, minute(0).Add(5*time.Second), sonnet, ops.StatusSucceeded, sent{limited, 0}, sent{ok, 230})
	w.messagesOp(t, minute(0), haiku, ops.StatusSucceeded, sent{ok, 50})
	// 1: a call whose first attempt timed out and whose resend was answered, both billed.
	twice := w.messagesOp(t, minute(1), sonnet, ops.StatusSucceeded, sent{timeout, 0}, sent{ok, 300})
	w.messagesOp(t, minute(1).Add(10*time.Second), sonnet, ops.StatusSucceeded, sent{ok, 120})
	// 2: a call that timed out and was resent, the first attempt not billed: in order.
	w.messagesOp(t, minute(2), sonnet, ops.StatusSucceeded, sent{timeout, 0}, sent{ok, 90})
	// 3 and 4: a call started at the end of minute 3 that the report counts in minute 4.
	w.messagesOp(t, minute(4).Add(-time.Second), sonnet, ops.StatusSucceeded, sent{ok, 77})
	// 5: someone else on the key. 6: an answered call missing from the report.
	w.messagesOp(t, minute(5), sonnet, ops.StatusSucceeded, sent{ok, 10})
	w.messagesOp(t, minute(6), sonnet, ops.StatusSucceeded, sent{ok, 10})
	// 7: a call still unknown, its prompt billed; Settle never learned the prompt's size.
	lost := w.messagesOp(t, minute(7), haiku, ops.StatusUnknown, sent{timeout, 0})
	// 8 and 9: a call whose first attempt timed out at the end of minute 8 and whose resend
	// was answered in minute 9; the report counts both generations in minute 9.
	late := w.messagesOp(t, minute(9).Add(-time.Second), sonnet, ops.StatusSucceeded, sent{timeout, 0}, sent{ok, 140})
	row := func(n int, model string, prompt int64) recon.UsageRow {
		return recon.UsageRow{Start: minute(n), Width: time.Minute, APIKeyID: "apikey_settle", Model: model, InputTokens: prompt, OutputTokens: 1}
	}
	snap := sonnet + "-20250929"
	report := &promptReport{usageReport{name: "anthropic", rows: []recon.UsageRow{
		row(0, snap, 330), row(0, "claude-haiku-4-5-20251001", 50),
		row(1, snap, 300+300+120),
		row(2, snap, 90),
		row(4, snap, 77),
		row(5, snap, 10+999),
		row(7, "claude-haiku-4-5-20251001", 64),
		row(9, snap, 280),
	}}}
	w.recon.Usage = []recon.UsageSource{report}
	win := recon.Window{From: m0, To: w.clock.Now()}

	rep, err := w.recon.Reconcile(ctx, "anthropic", win)
	if err != nil {
		t.Fatal(err)
	}
	if rep.UsageMismatch != 5 || rep.NewExceptions != 5 || rep.BilledTokens != 330+50+720+90+77+1009+64+280 || rep.NewUsageRows != 8 {
		t.Fatalf("run: %s", rep.Summary())
	}
	type found struct {
		severity, summary, op string
	}
	got := map[string]found{}
	rows, err := w.db.Pool.Query(ctx, `SELECT ref, severity, summary, coalesce(operation_id::text, '') FROM recon_exceptions WHERE kind = 'usage_mismatch'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var ref string
		var f found
		if err := rows.Scan(&ref, &f.severity, &f.summary, &f.op); err != nil {
			t.Fatal(err)
		}
		got[ref] = f
	}
	ref := func(n int, model string) string { return minute(n).Format(time.RFC3339) + "/1m0s " + model }
	if f := got[ref(1, snap)]; f.severity != "low" || f.op != twice || !strings.Contains(f.summary, "1 call billed twice") ||
		!strings.Contains(f.summary, "billed 720 prompt tokens") {
		t.Fatalf("the minute of the call billed twice: %+v (all: %+v)", f, got)
	}
	if f := got[ref(5, snap)]; f.severity != "high" || f.op != "" || !strings.Contains(f.summary, "999 tokens more than the attempts Settle sent could explain") {
		t.Fatalf("the minute someone else spent on the key: %+v", f)
	}
	if f := got[ref(6, snap)]; f.severity != "medium" || !strings.Contains(f.summary, "10 prompt tokens of answered attempts are missing") {
		t.Fatalf("the minute missing from the report: %+v (all: %+v)", f, got)
	}
	if f := got[ref(7, "claude-haiku-4-5-20251001")]; f.severity != "low" || f.op != lost || !strings.Contains(f.summary, "may have been billed") {
		t.Fatalf("the minute of the unknown call: %+v (all: %+v)", f, got)
	}
	if f := got[minute(8).Format(time.RFC3339)+"/2m0s "+snap]; f.severity != "low" || f.op != late || !strings.Contains(f.summary, "in the 2 minutes from") ||
		!strings.Contains(f.summary, "1 call billed twice") {
		t.Fatalf("the call billed twice across two minutes: %+v (all: %+v)", f, got)
	}
	if n := w.count(t, `SELECT count(*) FROM operations WHERE status = 'unknown'`); n != 1 {
		t.Fatalf("%d unknown operations after the run, want the one left unknown", n)
	}
	// Only uncertain attempts are listed one by one: the answered and the refused attempts of
	// a minute come summed per model and outcome, so a busy day is a few rows a minute.
	first, err := reconstore.New(w.db).SentPrompts(ctx, "anthropic", recon.Window{From: minute(0), To: minute(2)}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var rowsOf0, uncertain int
	for _, s := range first {
		if s.Start.Equal(minute(0)) {
			rowsOf0++
			if s.Outcome == ok && s.Model == snap && (s.Count != 2 || s.PromptTokens != 330 || s.OperationID != "") {
				t.Fatalf("minute 0's answered sonnet attempts: %+v", s)
			}
		} else if s.Outcome == timeout && (s.OperationID != twice || s.Count != 1 || s.PromptTokens != 300) {
			t.Fatalf("minute 1's uncertain attempt: %+v", s)
		} else if s.Outcome == timeout {
			uncertain++
		}
	}
	if rowsOf0 != 3 || uncertain != 1 || len(first) != 5 {
		t.Fatalf("the prompts sent in minutes 0 and 1: %+v", first)
	}
	again, err := w.recon.Reconcile(ctx, "anthropic", win)
	if err != nil || again.NewExceptions != 0 || again.SeenExceptions != 5 {
		t.Fatalf("second run: %s (%v)", again.Summary(), err)
	}
}
