package web_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	upstream "github.com/settle-dev/settle/ops/anthropic"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
)

// adminKey is the Admin API key the reconciler reads the fake Anthropic's usage report with.
const adminKey = "sk-ant-admin01-settle-recon"

// newReconciledMessagesWorld is the Messages API world with the fake Anthropic on the
// server's manual clock, so that the usage report's minutes are the ledger's, and the
// reconciler reading that report with an Admin API key.
func newReconciledMessagesWorld(t *testing.T) (*messagesWorld, *ops.ManualClock, *recon.Reconciler) {
	t.Helper()
	s, tw := newServer(t)
	clock := s.Clock.(*ops.ManualClock)
	w := &messagesWorld{world: tw, db: tw.DB, tokens: map[string]string{}}
	w.fake = fake.NewAnthropic(fake.AnthropicOptions{Clock: clock.Now, ChunkDelay: time.Millisecond, Words: 12, AdminKey: adminKey})
	base, err := w.fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.fake.Close() })
	up, err := upstream.New(upstream.Config{BaseURL: base, APIKey: upstreamKey, AttemptTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ledger := tw.Ledger(clock)
	ledger.Limits.BaseBackoff, ledger.Limits.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	w.gw, err = llm.New(llm.Config{Ledger: ledger, Upstreams: map[string]llm.Upstream{llm.MessagesRoute: up}, Prices: llm.DefaultPrices(),
		TenantModes: map[string]llm.Mode{"pipeline": llm.Batch}, Refs: tw.DB})
	if err != nil {
		t.Fatal(err)
	}
	s.LLM, s.Recon, s.Exceptions, s.Operations = w.gw, rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB
	w.url = tw.Serve(s.Handler())
	for _, name := range []string{"shop", "pipeline"} {
		w.tokens[name] = tw.Token(tw.Tenant(name), "test")
	}
	r := &recon.Reconciler{Ledger: ledger, Store: reconstore.New(tw.DB), Events: tw.DB, Leases: tw.DB, Owner: "test",
		Usage: []recon.UsageSource{&upstream.UsageReader{BaseURL: base, AdminKey: adminKey}}}
	return w, clock, r
}

// TestReconcilerReportsAMessageBilledTwice: Anthropic's usage report counts prompt tokens per
// minute, model and key, not requests, and every attempt of one call sends the same prompt.
// A call whose stream Anthropic cut and which the interactive policy sent again was generated
// and billed twice for one operation: the reconciler reports that minute as a possible
// double billing naming the operation, while the minutes whose calls were each billed once,
// or refused with a 529 that bills nothing, are in order (ops rule 3). A batch call billed
// and then timed out is reported in its minute as what may explain the tokens billed, and
// stays unknown for a person: the report's sums are no record of its message (ops rules 9
// and 11).
func TestReconcilerReportsAMessageBilledTwice(t *testing.T) {
	t.Parallel()
	w, clock, r := newReconciledMessagesWorld(t)
	ctx := context.Background()
	keyed := func(k string) aoption.RequestOption { return aoption.WithHeader("Idempotency-Key", k) }

	// 09:00: one call answered at once, and one whose stream broke and was sent again.
	if _, err := w.sdk("shop").Messages.New(ctx, claudeAsk("where is order 5101?"), keyed("rm-plain")); err != nil {
		t.Fatal(err)
	}
	w.fake.AddFault(fake.LLMFault{Path: "/v1/messages", Kind: fake.LLMFaultDropStream, Chunk: 6, Times: 1})
	p := claudeAsk("draft the reply to ticket 5102")
	if _, types, err := accumulate(t, w.sdk("shop").Messages.NewStreaming(ctx, p, keyed("rm-resent"))); err == nil || types[len(types)-1] == "message_stop" {
		t.Fatalf("the cut stream ended %v with %v", types, err)
	}
	if _, err := w.sdk("shop").Messages.New(ctx, p, keyed("rm-resent")); err != nil {
		t.Fatal(err)
	}
	// 09:02: a batch call billed, then timed out.
	clock.Advance(2 * time.Minute)
	w.fake.AddFault(fake.LLMFault{Path: "/v1/messages", Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
	if _, err := w.sdk("pipeline").Messages.New(ctx, claudeAsk("classify document 5103"), keyed("rm-unknown")); err == nil {
		t.Fatal("a batch call that timed out answered")
	}
	// 09:04: a 529, billed nothing, then the answer.
	clock.Advance(2 * time.Minute)
	w.fake.AddFault(fake.LLMFault{Path: "/v1/messages", Kind: fake.LLMFaultOverloaded, Times: 1})
	if _, err := w.sdk("shop").Messages.New(ctx, claudeAsk("where is order 5104?"), keyed("rm-529")); err != nil {
		t.Fatal(err)
	}
	if n := len(w.fake.Generations()); n != 5 {
		t.Fatalf("Anthropic billed %d messages, want 5", n)
	}
	resent, unknown := w.op(t, "rm-resent"), w.op(t, "rm-unknown")
	if resent.Status != ops.StatusSucceeded || resent.Attempts != 2 || unknown.Status != ops.StatusUnknown {
		t.Fatalf("the resent call is %s after %d attempts, the batch call %s", resent.Status, resent.Attempts, unknown.Status)
	}
	// The resend counts as a possible duplicate of the messages API, which
	// LLMDoubleBillingSuspected is computed from per API.
	tallies, err := alertstore.New(w.db).Tally(ctx, clock.Now().Add(-time.Hour), clock.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var dups float64
	for _, tl := range tallies {
		if tl.Metric == alerts.MetricPossibleDuplicates && tl.Labels["api"] == "messages" && tl.Labels["tenant"] == "shop" {
			dups += tl.N
		}
	}
	if dups != 1 {
		t.Fatalf("%v possible duplicates on api=messages, want 1", dups)
	}

	clock.Advance(20 * time.Minute) // past the report's delay
	reps, err := r.RunOnce(ctx)
	if err != nil || len(reps) != 1 || reps[0].Provider != "anthropic" {
		t.Fatalf("reports %+v, %v", reps, err)
	}
	if rep := reps[0]; rep.UsageMismatch != 2 || rep.NewExceptions != 2 || rep.Answered != 3 || rep.Buckets != 3 || rep.BilledTokens <= rep.AnsweredTokens {
		t.Fatalf("run: %s", rep.Summary())
	}
	type finding struct {
		id                     int64
		ref, severity, summary string
		op                     string
	}
	var got []finding
	rows, err := w.db.Pool.Query(ctx, `SELECT id, ref, severity, summary, coalesce(operation_id::text, '') FROM recon_exceptions
WHERE kind = 'usage_mismatch' AND provider = 'anthropic' ORDER BY ref`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var f finding
		if err := rows.Scan(&f.id, &f.ref, &f.severity, &f.summary, &f.op); err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	if len(got) != 2 {
		t.Fatalf("usage mismatches %+v, want the resent minute's and the unknown call's", got)
	}
	double, lost := got[0], got[1]
	if !strings.HasPrefix(double.ref, t0.Format(time.RFC3339)+"/1m0s claude-sonnet-4-5") || double.severity != "low" ||
		double.op != resent.ID || !strings.Contains(double.summary, "billed twice") || !strings.Contains(double.summary, resent.ID) {
		t.Fatalf("the minute of the resent call: %+v", double)
	}
	if !strings.HasPrefix(lost.ref, t0.Add(2*time.Minute).Format(time.RFC3339)+"/1m0s") || lost.severity != "low" || lost.op != unknown.ID {
		t.Fatalf("the minute of the unknown call: %+v", lost)
	}
	// The exception's page sets the tokens billed beside those of the answered attempts; the
	// requests billed are counted where the tokens tell them.
	e := &env{db: w.db, url: w.url}
	c := signIn(t, e, "oncall@example.com", desk.RoleOncall)
	resp, page := e.get(t, c, "/reconcile/exceptions/"+strconv.FormatInt(double.id, 10))
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Billed prompt tokens") || !strings.Contains(page, "anthropic usage report") ||
		!strings.Contains(page, resent.ID) {
		t.Fatalf("the exception's page = %d\n%s", resp.StatusCode, page)
	}
	if op := w.op(t, "rm-unknown"); op.Status != ops.StatusUnknown {
		t.Fatalf("the reconciler closed the unknown Messages call as %s", op.Status)
	}
	again, err := r.RunOnce(ctx)
	if err != nil || again[0].NewExceptions != 0 {
		t.Fatalf("a second run: %+v, %v", again, err)
	}
}
