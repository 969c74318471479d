package web_test

import (
	"context"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/opstest"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/retainstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/retain"
)

// TestInsightsSplitLLMByAPIAfterRetention: the insights page splits the LLM figures by the
// API each call went to, from the rollups alone, so the split outlives the raw rows: calls
// whose operations the retention removed, and a call whose request (which names its API) the
// body purge deleted before a late close made the rollup job count its minute again, are
// still counted under their own API (ops rule 8: the figures are counts of what was
// recorded, whatever has been removed since).
func TestInsightsSplitLLMByAPIAfterRetention(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	s.Recon, s.Exceptions, s.Operations, s.Insights, s.Firings = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB, rollupstore.New(tw.DB), alertstore.New(tw.DB)
	e := start(t, tw, s.Handler())
	ctx := context.Background()
	shop := tw.Tenant("shop")
	old := t0.Add(-20 * 24 * time.Hour)
	clock := ops.NewManualClock(old)
	ledger := tw.Ledger(clock)
	seed := opstest.New(ledger, tw.DB)

	// call opens an llm_call of route, answers it, and answers each repeat of its key as a
	// replay.
	call := func(key, provider, route string, repeats int, close bool) *ops.Operation {
		t.Helper()
		o, err := seed.Open(ctx, ops.Intent{TenantID: shop.ID, Kind: ops.KindLLMCall, Provider: provider, IntentKey: key, Fingerprint: "fp-" + key,
			Request: []byte(`{"policy":"interactive","route":"` + route + `","body":{"model":"m","input":"hi"}}`)}, "req-"+key, "gw")
		if err != nil {
			t.Fatal(err)
		}
		op := o.Op
		if close {
			cost := int64(1000)
			if op, err = seed.Finish(ctx, o.Op, o.Attempt, "gw", ops.AttemptResult{Outcome: ops.OutcomeOK, CostMicros: &cost,
				Result: &ops.Result{ProviderRef: "ref-" + key, Body: []byte(`{}`), CostMicros: cost}, ClientRequestID: o.ClientRequestID,
				Answer: ops.AnswerNew}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range repeats {
			clock.Advance(time.Second)
			again, err := ledger.Admit(ctx, ops.Intent{TenantID: shop.ID, Kind: ops.KindLLMCall, Provider: provider, IntentKey: key,
				Fingerprint: "fp-" + key, RequestRef: "again-" + key + string(rune('a'+i)), ReplayOnly: true})
			if err != nil || again.Verdict != ops.VerdictReplay {
				t.Fatalf("asked again: %+v %v", again, err)
			}
		}
		return op
	}
	// Twenty days ago: two responses (one asked again and replayed), a message and a chat
	// completion, all answered.
	call("r1", "openai", "/v1/responses", 1, true)
	call("r2", "openai", "/v1/responses", 0, true)
	call("m1", "anthropic", "/v1/messages", 0, true)
	call("c1", "openai", "/v1/chat/completions", 0, true)
	clock.Advance(time.Hour)
	roll := &recon.Rollups{Store: rollupstore.New(e.db), Clock: clock, MaxSpan: 30 * 24 * time.Hour, MinuteKeep: -1}
	if _, err := roll.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}

	// Three days ago: an embeddings call whose answer was lost, left unknown; its request
	// is purged, and a person closes it later, so the rollup job counts its minute again
	// from the raw rows, which no longer name the API in the request.
	clock.Set(t0.Add(-3 * 24 * time.Hour))
	emb := call("e1", "openai", "/v1/embeddings", 0, false)
	emb, err := e.db.Transition(ctx, ops.TransitionParams{ID: emb.ID, Version: emb.Version, From: ops.StatusInProgress, To: ops.StatusUnknown,
		Now: clock.Now(), Actor: "gw", Action: "mark_unknown", Reason: "no answer"})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if _, err := roll.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	e.exec(t, `UPDATE operations SET request = NULL, purged_at = $2 WHERE id = $1`, emb.ID, clock.Now())

	// Today: the retention removes the closed calls of twenty days ago, row and all, and a
	// person closes the embeddings call.
	clock.Set(t0.Add(-time.Hour))
	r := &retain.Retention{Store: retainstore.New(e.db), Clock: clock, Keep: 8 * 24 * time.Hour, Actor: "retention:test"}
	if rep, err := r.RunOnce(ctx, false); err != nil || rep.Operations != 4 {
		t.Fatalf("retention: %+v %v; want the four closed calls removed", rep, err)
	}
	if _, err := e.db.Transition(ctx, ops.TransitionParams{ID: emb.ID, Version: emb.Version, From: ops.StatusUnknown, To: ops.StatusFailed,
		Now: clock.Now(), Actor: "oncall@example.com", Action: "close", Reason: "the provider's usage report shows nothing"}); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, e, `SELECT count(*) FROM operations`); n != 1 {
		t.Fatalf("%d operations left, want only the embeddings call", n)
	}
	rollUp(t, e)

	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	summary := func(path, chart string) string {
		t.Helper()
		r, body := e.get(t, c, path)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d\n%s", path, r.StatusCode, body)
		}
		m := regexp.MustCompile(`data-testid="chart-` + chart + `"[\s\S]*?data-testid="chart-summary"><strong>([^<]*)<`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("GET %s: no summary for chart %s\n%s", path, chart, body)
		}
		return m[1]
	}
	for path, want := range map[string]string{
		"/insights?range=30d":                      "16.67 % over the range (1 of 6 admitted requests).",
		"/insights?range=30d&api=responses":        "33.33 % over the range (1 of 3 admitted requests).",
		"/insights?range=30d&api=messages":         "0 % over the range (0 of 1 admitted requests).",
		"/insights?range=30d&api=chat_completions": "0 % over the range (0 of 1 admitted requests).",
		"/insights?range=30d&api=embeddings":       "0 % over the range (0 of 1 admitted requests).",
	} {
		if got := summary(path, "duplicate-rate"); got != want {
			t.Errorf("GET %s: duplicate rate %q, want %q", path, got, want)
		}
	}

	// The table of LLM calls by API, over the range.
	_, body := e.get(t, c, "/insights?range=30d")
	for api, want := range map[string][2]string{
		"responses": {"3", "1"}, "messages": {"1", "0"}, "chat_completions": {"1", "0"}, "embeddings": {"1", "0"},
	} {
		row := between(t, body, `data-api="`+api+`"`, `</tr>`)
		mustContain(t, row, `data-testid="api-requests">`+want[0]+`<`, `data-testid="api-replays">`+want[1]+`<`)
	}
	if r, _ := e.get(t, c, "/insights?api=fax"); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("GET /insights?api=fax = %d, want 422", r.StatusCode)
	}
}

func countRows(t *testing.T, e *env, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestReconcileSplitsLLMRowsByAPI: the reconciliation table has one row per API an LLM
// provider's calls went to, each drilling into its own calls only, and can be narrowed to
// one API (ops rule 8).
func TestReconcileSplitsLLMRowsByAPI(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	s.Recon, s.Exceptions, s.Operations, s.Insights, s.Firings = rollupstore.New(tw.DB), reconstore.New(tw.DB), tw.DB, rollupstore.New(tw.DB), alertstore.New(tw.DB)
	e := start(t, tw, s.Handler())
	ctx := context.Background()
	shop := tw.Tenant("shop")
	seed := opstest.New(tw.Ledger(ops.NewManualClock(t0.Add(-30*time.Minute))), tw.DB)
	opened := map[string]string{}
	for key, route := range map[string]string{"r1": "/v1/responses", "r2": "/v1/responses", "c1": "/v1/chat/completions"} {
		o, err := seed.Open(ctx, ops.Intent{TenantID: shop.ID, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: key, Fingerprint: "fp",
			Request: []byte(`{"route":"` + route + `","body":{"model":"m"}}`)}, "req-"+key, "gw")
		if err != nil {
			t.Fatal(err)
		}
		opened[key] = o.Op.ID
	}
	rollUp(t, e)
	c := signIn(t, e, "manager@example.com", desk.RoleManager)
	_, body := e.get(t, c, "/reconcile?range=24h&bucket=hour")
	rows := regexp.MustCompile(`data-testid="recon-api">([^<]*)<[\s\S]*?data-testid="recon-client_requests">\s*(?:<a href="([^"]*)">)?([^<\s]*)`).FindAllStringSubmatch(body, -1)
	got := map[string]string{}
	links := map[string]string{}
	for _, r := range rows {
		got[r[1]], links[r[1]] = r[3], r[2]
	}
	if got["responses"] != "2" || got["chat_completions"] != "1" {
		t.Fatalf("client requests by API %v, want 2 for responses and 1 for chat completions\n%s", got, body)
	}
	_, drill := e.get(t, c, strings.ReplaceAll(links["responses"], "&amp;", "&"))
	mustContain(t, drill, opened["r1"], opened["r2"])
	mustNotContain(t, drill, opened["c1"])

	_, body = e.get(t, c, "/reconcile?range=24h&bucket=hour&api=chat_completions")
	mustContain(t, body, `data-testid="recon-api">chat_completions<`)
	mustNotContain(t, body, `data-testid="recon-api">responses<`)
	if r, _ := e.get(t, c, "/reconcile?api=fax"); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("GET /reconcile?api=fax = %d, want 422", r.StatusCode)
	}
}
