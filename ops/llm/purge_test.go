package llm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/purgestore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
)

// Bodies do not live forever: past the key's TTL and the keep, the purge deletes the
// prompt and the completion and leaves the operation, its usage and its fingerprint; a
// replay of the key then gets a refusal of its own (answer_purged, which web answers 410),
// never an internal error, and nothing is generated again.
func TestLLMReplayAfterPurgeIsAnswerPurged(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	r, err := w.call("shop", "k-purge", chatBody("hello", 0.2, false))
	completion(t, r, err)
	before := w.op(t, "k-purge")
	ttl, keep := 24*time.Hour, llm.DefaultBodyKeep
	purge := func(at time.Time) llm.PurgeReport {
		t.Helper()
		rep, err := (&llm.Purger{Store: purgestore.New(w.db), Clock: ops.NewManualClock(at), Keep: keep, JobTTL: ttl, Batch: 1}).RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := purge(before.CreatedAt.Add(ttl + keep - time.Minute)); rep.Operations != 0 {
		t.Fatalf("purged %d operations before the TTL and the keep passed", rep.Operations)
	}
	if rep := purge(before.CreatedAt.Add(ttl + keep + time.Minute)); rep.Operations != 1 {
		t.Fatalf("purged %d operations, want the one", rep.Operations)
	}
	after := w.op(t, "k-purge")
	if after.PurgedAt == nil || len(after.Request) != 0 || len(after.Result) != 0 {
		t.Fatalf("after the purge: purged_at %v, request %d bytes, result %d bytes", after.PurgedAt, len(after.Request), len(after.Result))
	}
	if after.Status != ops.StatusSucceeded || after.Fingerprint != before.Fingerprint || string(after.Usage) != string(before.Usage) ||
		after.CostMicros != before.CostMicros || after.Version != before.Version {
		t.Fatalf("the purge changed more than the bodies: %+v, was %+v", after, before)
	}
	// The gateway's clock has not moved: the key still replays, and finds no answer.
	r, err = w.call("shop", "k-purge", chatBody("hello", 0.2, false))
	if said := wantRefused(t, r, err, ops.ENOTFOUND, llm.ReasonAnswerPurged); said == "" {
		t.Fatal("the refusal says nothing")
	}
	r, err = w.call("shop", "k-purge", chatBody("hello", 0.2, true))
	wantRefused(t, r, err, ops.ENOTFOUND, llm.ReasonAnswerPurged)
	w.generations(t, 1)
	if rep := purge(before.CreatedAt.Add(ttl + keep + time.Hour)); rep.Operations != 0 {
		t.Fatalf("a second purge purged %d operations again", rep.Operations)
	}
}

// TestLLMLateCloseLeavesAPurgedCallPurged: a call whose outcome is unknown has its prompt
// purged with the rest once the key's TTL and the keep have passed. A lookup that closes it
// later from the provider's stored completion settles it, but keeps no completion past its
// time: the operation stays purged, the purge that runs next finds nothing left to delete,
// and the lookup says why no answer is kept.
func TestLLMLateCloseLeavesAPurgedCallPurged(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	ctx := context.Background()
	d := &desk.Desk{Ledger: w.ledger, Events: w.db, Audit: deskstore.New(w.db), Completions: w.lookups, Findings: reconstore.New(w.db), Bulk: deskstore.New(w.db)}
	op, gen := w.billedThenTimedOut(t, "doc-late", "classify the late document")
	ttl, keep := 24*time.Hour, llm.DefaultBodyKeep
	purge := func(at time.Time) llm.PurgeReport {
		t.Helper()
		rep, err := (&llm.Purger{Store: purgestore.New(w.db), Clock: ops.NewManualClock(at), Keep: keep, JobTTL: ttl, Batch: 1}).RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	due := op.CreatedAt.Add(ttl + keep + time.Minute)
	if rep := purge(due); rep.Operations != 1 {
		t.Fatalf("purged %d operations, want the unknown one", rep.Operations)
	}

	w.clock.Set(due.Add(time.Hour))
	out, err := d.Lookup(ctx, op.ID, "oncall@example.com")
	if err != nil || out.Outcome != desk.LookupClosed {
		t.Fatalf("lookup: %s %q %v", out.Outcome, out.Message, err)
	}
	if !strings.Contains(out.Message, "SETTLE_LLM_BODY_KEEP") || strings.Contains(out.Message, "replays it") {
		t.Errorf("the lookup says %q", out.Message)
	}
	purge(due.Add(2 * time.Hour))
	after := w.op(t, "doc-late")
	if after.Status != ops.StatusSucceeded || after.ProviderRef != gen.ID {
		t.Fatalf("after the lookup: %s %s, want succeeded with %s", after.Status, after.ProviderRef, gen.ID)
	}
	if len(after.Result) != 0 || len(after.Request) != 0 || after.PurgedAt == nil {
		t.Fatalf("past its time the call keeps a result of %d bytes and a request of %d bytes (purged_at %v)",
			len(after.Result), len(after.Request), after.PurgedAt)
	}
	if n := w.count(t, `SELECT count(*) FROM operations WHERE purged_at IS NOT NULL AND (result IS NOT NULL OR request IS NOT NULL)`); n != 0 {
		t.Fatalf("%d purged operations hold a body", n)
	}
}

// TestStreamEventsArePurgedWithTheAnswer: the stored events of a stream are a body like the
// answer itself: the purge deletes them with it, and a replay is then told the answer is no
// longer kept, never given events.
func TestStreamEventsArePurgedWithTheAnswer(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{chunkDelay: 50 * time.Millisecond})
	body := chatBody("hello", 0.2, true)
	if r, err := w.call("shop", "purged-1", body); err != nil || !r.head.Stream {
		t.Fatalf("the stream: %v %+v", err, r.head)
	}
	op := w.waitStatus(t, "purged-1", ops.StatusSucceeded)
	var stored int
	q := `SELECT coalesce(length(stream_events::text), 0) FROM operations WHERE id = $1`
	if err := w.db.Pool.QueryRow(context.Background(), q, op.ID).Scan(&stored); err != nil || stored == 0 {
		t.Fatalf("stored events: %d bytes, %v", stored, err)
	}
	at := op.CreatedAt.Add(op.Retention + llm.DefaultBodyKeep + time.Minute)
	if rep, err := (&llm.Purger{Store: purgestore.New(w.db), Clock: ops.NewManualClock(at)}).RunOnce(context.Background()); err != nil || rep.Operations != 1 {
		t.Fatalf("purge: %+v %v", rep, err)
	}
	if err := w.db.Pool.QueryRow(context.Background(), q, op.ID).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("after the purge the events keep %d bytes, %v", stored, err)
	}
	// A retry that resumes after an event of the stream it read.
	r := &reply{}
	err := w.gw.Complete(context.Background(), llm.Request{Tenant: w.tenants["shop"], Route: "/v1/chat/completions",
		Key: "purged-1", HasKey: true, ContentType: "application/json", Body: strings.NewReader(body),
		Header: func(name string) string {
			if name == "Last-Event-ID" {
				return "1-3"
			}
			return ""
		}}, r)
	wantRefused(t, r, err, ops.ENOTFOUND, llm.ReasonAnswerPurged)
	w.generations(t, 1)
}
