package web_test

import (
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	upstream "github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/web"
)

// lookupSetup shapes a lookupWorld.
type lookupSetup struct {
	attemptTimeout time.Duration
	// noStore makes the fake a provider without stored completions.
	noStore bool
	// reconciled tells the gateway a reconciler looks unknown calls up.
	reconciled bool
}

// lookupWorld is the gateway and the dashboard on one server, wired for real, with lookups
// in the fake provider's stored completions: the gateway's tenant "pipeline" is batch, so a
// timed-out call stays unknown for the desk or the reconciler to settle.
type lookupWorld struct {
	*llmWorld
	dash    *dashEnv
	up      *upstream.Client
	ledger  *ops.Ledger
	lookups *llm.Lookups
	desk    *desk.Desk
}

func newLookupWorld(t *testing.T, o lookupSetup) *lookupWorld {
	t.Helper()
	s, tw := newServer(t)
	clock := s.Clock.(*ops.ManualClock)
	db := tw.DB
	w := &llmWorld{world: tw, db: db, clock: clock, tokens: map[string]string{}}
	w.fake, w.base = tw.LLM(fake.LLMOptions{Seed: 1, Clock: clock.Now, NoStore: o.noStore})
	if o.attemptTimeout == 0 {
		o.attemptTimeout = 300 * time.Millisecond
	}
	up := tw.Upstream(w.base, upstream.Config{Name: "fake-llm", APIKey: "sk-settle-upstream", AttemptTimeout: o.attemptTimeout}).(*upstream.Client)
	ledger := tw.Ledger(clock)
	ledger.Limits.BaseBackoff, ledger.Limits.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	gw, err := llm.New(llm.Config{Ledger: ledger, Upstream: up, Prices: llm.DefaultPrices(),
		TenantModes: map[string]llm.Mode{"pipeline": llm.Batch}, Stored: up, Reconciled: o.reconciled, Refs: db})
	if err != nil {
		t.Fatal(err)
	}
	lookups := &llm.Lookups{Ledger: ledger, Events: db, Store: up, Prices: llm.DefaultPrices()}
	d := &desk.Desk{Ledger: ledger, Events: db, Audit: deskstore.New(db), Completions: lookups, Findings: reconstore.New(db), Bulk: deskstore.New(db)}
	s.LLM, s.Operations = gw, db
	s.DashboardDeps = web.DashboardDeps{Desk: d, Bulk: d, Timelines: deskstore.New(db), SupportSearch: deskstore.New(db), AuditLog: deskstore.New(db), UserAdmin: accounts(db),
		TokenAdmin: accountstore.New(db), JobViews: jobstore.New(db)}
	e := start(t, tw, s.Handler())
	w.gw, w.url = gw, e.url
	for _, name := range llmTenants {
		w.tokens[name] = tw.Token(tw.Tenant(name), "test")
	}
	dash := &dashEnv{env: e, clock: clock, ledger: ledger, server: s, world: tw, tenant: tw.Tenant("pipeline"), desk: d}
	return &lookupWorld{llmWorld: w, dash: dash, up: up, ledger: ledger, lookups: lookups, desk: d}
}

// billedThenTimedOut sends one batch call whose generation the provider bills and stores
// and whose answer times out: the operation is unknown, the completion exists.
func (w *lookupWorld) billedThenTimedOut(t *testing.T, key, question string) (*ops.Operation, fake.Generation) {
	t.Helper()
	before := len(w.fake.Generations())
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Times: 1, Delay: 3 * time.Second})
	wantProblem(t, w.post(t, "pipeline", key, chatBody(question, 0, false)), 504, llm.ReasonTimeout)
	op := w.op(t, key)
	if op.Status != ops.StatusUnknown {
		t.Fatalf("operation %s, want unknown", op.Status)
	}
	gens := w.generations(t, before+1)
	return op, gens[before]
}
