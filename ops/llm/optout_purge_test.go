package llm_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/purgestore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
)

// storeReads counts the requests that read the provider's store of calls: the list and the
// get of stored chat completions, and the get of a stored response.
type storeReads struct {
	next http.Handler
	n    atomic.Int64
}

func (s *storeReads) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && (strings.HasPrefix(r.URL.Path, "/v1/chat/completions") || strings.HasPrefix(r.URL.Path, "/v1/responses/")) {
		s.n.Add(1)
	}
	s.next.ServeHTTP(w, r)
}

// TestAPurgedStoreFalseCallIsStillNotLookedUp: a client that sent store: false asked the
// provider to keep no copy of its call, so there is nothing in the provider's store to find.
// Once the purge deleted the request that said so, the call is still known to have opted
// out: its page still says it cannot be looked up there, and neither the desk's lookup nor
// the reconciler asks the provider's store for it, whether it was a chat completion or a
// Responses call (ops rule 12: a lookup promised or run for it would claim more than Settle
// knows, and one that finds nothing would read as evidence it never had).
func TestAPurgedStoreFalseCallIsStillNotLookedUp(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{stored: true, reconciled: true, modes: map[string]llm.Mode{"pipeline": llm.Batch}})
	ctx := context.Background()

	// A chat completion billed by the provider whose answer timed out.
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
	r, err := w.call("pipeline", "no-store-chat", `{"model":"fake-small","store":false,"messages":[{"role":"user","content":"classify"}]}`)
	wantRefused(t, r, err, ops.EUNAVAILABLE, llm.ReasonTimeout)
	// A Responses call whose stream the provider dropped part-way.
	w.fake.AddFault(fake.LLMFault{Path: responsesRoute, Kind: fake.LLMFaultDropStream, Chunk: 3, Times: 1})
	if r, err := w.callOn(w.gw, responsesRoute, "pipeline", "no-store-resp", `{"model":"fake-small","input":"summarise","stream":true,"store":false}`, ""); err != nil || !r.began {
		t.Fatalf("the streamed call: %v, answer began %v", err, r.began)
	}
	keys := []string{"no-store-chat", "no-store-resp"}
	for _, key := range keys {
		if op := w.op(t, key); op.Status != ops.StatusUnknown {
			t.Fatalf("%s: operation %s, want unknown", key, op.Status)
		}
	}

	// The desk and the reconciler read the provider through a counter of reads of its store.
	reads := &storeReads{next: w.fake.Handler()}
	srv := httptest.NewServer(reads)
	t.Cleanup(srv.Close)
	up := w.world.Upstream(srv.URL+"/v1", openai.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"}).(*openai.Client)
	lookups := &llm.Lookups{Ledger: w.ledger, Events: w.db, Store: up, Prices: llm.DefaultPrices()}
	d := &desk.Desk{Ledger: w.ledger, Events: w.db, Audit: deskstore.New(w.db), Completions: lookups, Findings: reconstore.New(w.db), Bulk: deskstore.New(w.db)}

	// notLookedUp checks, for each call, the sentence its page shows and what the desk's
	// lookup does.
	notLookedUp := func(when string) {
		t.Helper()
		for _, key := range keys {
			op := w.op(t, key)
			if ok, why := d.CanLookUp(ctx, op); ok || !strings.Contains(why, "store: false") {
				t.Errorf("%s, %s: lookup offered %v: %q; want none, because the client sent store: false", when, key, ok, why)
			}
			out, err := d.Lookup(ctx, op.ID, "oncall@example.com")
			if err != nil || out.Outcome != desk.LookupUnsupported || !strings.Contains(out.Message, "store: false") {
				t.Errorf("%s, %s: lookup %s %q %v; want unsupported, because the client sent store: false", when, key, out.Outcome, out.Message, err)
			}
			if got := w.op(t, key); got.Status != ops.StatusUnknown {
				t.Errorf("%s, %s: operation %s after the lookup, want still unknown", when, key, got.Status)
			}
		}
		if n := reads.n.Load(); n != 0 {
			t.Errorf("%s: the provider's store was read %d times for calls it keeps no copy of", when, n)
		}
	}
	notLookedUp("before the purge")

	ttl, keep := 24*time.Hour, llm.DefaultBodyKeep
	due := w.op(t, "no-store-resp").CreatedAt.Add(ttl + keep + time.Minute)
	rep, err := (&llm.Purger{Store: purgestore.New(w.db), Clock: ops.NewManualClock(due), Keep: keep, JobTTL: ttl, Batch: 10}).RunOnce(ctx)
	if err != nil || rep.Operations != len(keys) {
		t.Fatalf("purged %d operations (%v), want %d", rep.Operations, err, len(keys))
	}
	for _, key := range keys {
		if op := w.op(t, key); op.PurgedAt == nil || len(op.Request) != 0 {
			t.Fatalf("%s: the purge left a request of %d bytes", key, len(op.Request))
		}
	}
	notLookedUp("after the purge")

	// The client's retry with its key is told a person settles it by hand, not that someone
	// looks it up in the provider's store.
	r, err = w.call("pipeline", "no-store-chat", `{"model":"fake-small","store":false,"messages":[{"role":"user","content":"classify"}]}`)
	if said := wantRefused(t, r, err, ops.ECONFLICT, llm.ReasonOutcomeUnknown); !strings.Contains(said, "store: false") || strings.Contains(said, "looks this one up") {
		t.Errorf("the retry after the purge is told %q", said)
	}

	// The reconciler leaves both to a person without asking the store.
	w.clock.Set(due.Add(recon.LookupGrace + time.Second))
	rc := &recon.Reconciler{Ledger: w.ledger, Store: reconstore.New(w.db), Events: w.db, Leases: w.db, Owner: "test",
		Usage: []recon.UsageSource{&openai.UsageReader{Provider: "fake-llm", BaseURL: strings.TrimSuffix(srv.URL, "/"),
			APIKey: "sk-settle-upstream", Lookups: lookups}}}
	reps, err := rc.RunOnce(ctx)
	if err != nil || len(reps) != 1 || reps[0].Looked != 0 || reps[0].Closed != 0 {
		t.Fatalf("reconciler: %+v, %v; want nothing looked up", reps, err)
	}
	if n := reads.n.Load(); n != 0 {
		t.Errorf("the reconciler read the provider's store %d times for calls it keeps no copy of", n)
	}
}
