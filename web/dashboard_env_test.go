package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/opstest"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
	"github.com/settle-dev/settle/web"
)

// The web layer's dashboard dependencies must be satisfied by the real implementations.
var (
	_ web.Desk            = (*desk.Desk)(nil)
	_ web.TimelineReader  = (*deskstore.Store)(nil)
	_ web.SupportSearcher = (*deskstore.Store)(nil)
	_ web.AuditReader     = (*deskstore.Store)(nil)
	_ web.UserAdmin       = (*accountstore.Store)(nil)
	_ web.TokenAdmin      = (*accountstore.Store)(nil)
	_ web.JobViewer       = (*jobstore.Store)(nil)
)

// dashEnv is the dashboard wired for real: Postgres, the ledger, stripe-go and the fake
// Stripe over loopback, on a manual clock the test moves.
type dashEnv struct {
	*env
	clock   *ops.ManualClock
	fake    *fake.Stripe
	adapter *stripe.Adapter
	ledger  *ops.Ledger
	tenant  *ops.Tenant
	server  *web.Server
	world   *testworld.World
	// desk is the dashboard's desk, for running its bulk lookups in the test's own time.
	desk *desk.Desk
}

// newDashEnv wires the dashboard; each wire func adds more of the server's dependencies
// before its routes are mounted, since a page without its dependency is mounted as
// not configured.
func newDashEnv(t *testing.T, wire ...func(*web.Server, *testworld.World)) *dashEnv {
	t.Helper()
	e := buildDashEnv(t, wire...)
	e.env = start(t, e.world, e.server.Handler())
	return e
}

// buildDashEnv is newDashEnv without serving it, for a test that must know the server's
// URL before it builds the handler.
func buildDashEnv(t *testing.T, wire ...func(*web.Server, *testworld.World)) *dashEnv {
	t.Helper()
	s, tw := newServer(t)
	db := tw.DB
	clock := s.Clock.(*ops.ManualClock)
	fk, base := tw.Stripe(fake.StripeOptions{WebhookSecret: hookSecret})
	adapter := tw.StripeAdapter(base, stripe.Config{APIKey: "sk_test_dash", AttemptTimeout: 2 * time.Second, ReadsPerSecond: 200})
	ledger := tw.Ledger(clock)
	refunds := &refund.Tool{Ledger: ledger, Store: db, Provider: adapter, Deadline: 3 * time.Second}
	s.Operations = db
	s.Refunds = refunds
	// Tokens are read through the cache, as serve does; its TTL outlasts any test, so a
	// revocation is seen at once only because the revoking handler clears it.
	s.Accounts = &web.TokenCache{Accounts: accounts(db), TTL: time.Hour, Clock: clock}
	d := &desk.Desk{Ledger: ledger, Refunds: refunds, Events: db, Audit: deskstore.New(db), Bulk: deskstore.New(db)}
	s.DashboardDeps = web.DashboardDeps{
		Desk: d, Bulk: d, SavedViews: &desk.SavedViews{Store: deskstore.New(db), Audit: deskstore.New(db), Clock: clock}, Timelines: deskstore.New(db), SupportSearch: deskstore.New(db),
		AuditLog: deskstore.New(db), UserAdmin: accounts(db), TokenAdmin: accountstore.New(db), JobViews: jobstore.New(db),
	}
	s.TenantsDeps = web.TenantsDeps{Tenants: db}
	for _, w := range wire {
		w(s, tw)
	}
	return &dashEnv{env: &env{db: db}, clock: clock, fake: fk, adapter: adapter, ledger: ledger,
		tenant: tw.Tenant("shop"), server: s, world: tw, desk: d}
}

// runBulk runs the bulk lookups started so far to their end, as serve's runner does, with
// pages of pageSize operations; it returns how many it ran.
func (e *dashEnv) runBulk(t *testing.T, pageSize int) int {
	t.Helper()
	r := &desk.BulkRunner{Desk: e.desk, Queues: deskstore.New(e.world.DB), Owner: "bulk:test", PageSize: pageSize}
	n := 0
	for {
		ran, err := r.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ran {
			return n
		}
		n++
	}
}

// open starts a refund of order the way the refund tool does: committed, leased to a
// worker, first attempt begun. Its policy stops at the first timeout, so that a lost answer
// leaves it unknown; it is looked up before it fails, as every refund is.
func (e *dashEnv) open(t *testing.T, order string, cents int64) (*ops.Operation, *ops.Attempt) {
	t.Helper()
	pi := "pi_" + strings.NewReplacer("<", "", ">", "", "/", "", " ", "", "\"", "", "'", "", "(", "", ")", "", "=", "", "&", "").Replace(order)
	e.fake.AddPaymentIntent(pi, 10000, "usd", fake.OwnedBy("shop"))
	o, err := e.seed().Open(context.Background(), ops.Intent{TenantID: e.tenant.ID, Kind: ops.KindRefund, Provider: "stripe",
		IntentKey: refund.IntentKey(order, cents, "usd"), Fingerprint: "fp-" + order, OrderRef: order, PaymentRef: pi,
		AmountCents: cents, Currency: "usd", Retention: e.adapter.Retention(), Policy: &ops.Policy{HasLookup: true}},
		"req-"+order, "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	return o.Op, o.Attempt
}

// refundedButUnknown is the refund agent's timeout: Stripe made the refund, the answer was
// lost, and the operation waits as unknown for someone to look it up.
func (e *dashEnv) refundedButUnknown(t *testing.T, order string) *ops.Operation {
	t.Helper()
	op, a := e.open(t, order, 3800)
	if res := e.adapter.Send(context.Background(), op, a); res.Outcome != ops.OutcomeOK {
		t.Fatalf("fake Stripe refused the refund: %+v", res)
	}
	return e.lose(t, op, a)
}

// notSentUnknown is an operation whose only attempt timed out before Stripe ran it.
func (e *dashEnv) notSentUnknown(t *testing.T, order string) *ops.Operation {
	t.Helper()
	op, a := e.open(t, order, 1200)
	return e.lose(t, op, a)
}

// seed builds operations in given states on the dashboard's ledger.
func (e *dashEnv) seed() *opstest.Seeder { return opstest.New(e.ledger, e.world.DB) }

func (e *dashEnv) lose(t *testing.T, op *ops.Operation, a *ops.Attempt) *ops.Operation {
	t.Helper()
	out, err := e.seed().Finish(context.Background(), op, a, "worker-1",
		ops.AttemptResult{Outcome: ops.OutcomeTimeout, ErrorCode: "timeout"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != ops.StatusUnknown {
		t.Fatalf("operation is %s, want unknown", out.Status)
	}
	return out
}

// llmUnknown is an LLM call whose outcome is unknown; nothing can look it up yet.
func (e *dashEnv) llmUnknown(t *testing.T, chat string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	op := &ops.Operation{ID: ops.NewOperationID(), TenantID: e.tenant.ID, Kind: ops.KindLLMCall, Provider: "openai",
		IntentKey: "idem-" + chat, ProviderKey: ops.NewProviderKey(), Fingerprint: "fp", ChatRef: chat}
	o, err := e.db.Open(ctx, ops.OpenParams{Op: op, Now: e.clock.Now(), Claim: "gw", LeaseUntil: e.clock.Now().Add(time.Second), Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.db.Transition(ctx, ops.TransitionParams{ID: o.Op.ID, Version: o.Op.Version, From: ops.StatusInProgress,
		To: ops.StatusUnknown, Now: e.clock.Now(), Actor: "gw", Action: "mark_unknown", Reason: "timeout"})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *dashEnv) get(t *testing.T, id string) *ops.Operation {
	t.Helper()
	op, err := e.db.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// signIn makes a user with role and returns a client signed in as them.
func (e *dashEnv) signIn(t *testing.T, email string, role desk.Role) *http.Client {
	t.Helper()
	if _, err := accounts(e.db).CreateUser(context.Background(), email, password, role); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	if resp := e.login(t, c, email, password); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login as %s: %d", email, resp.StatusCode)
	}
	return c
}

// post submits a form without following the redirect.
func (e *dashEnv) post(t *testing.T, c *http.Client, path string, form url.Values) *http.Response {
	t.Helper()
	resp, err := c.PostForm(e.url+path, form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// bulkLocation is the page of the bulk lookup that resp, the answer to "look up all
// matching", started.
func bulkLocation(t *testing.T, resp *http.Response) string {
	t.Helper()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/ops/bulk/") {
		t.Fatalf("look up all matching = %d to %q, want 303 to a bulk lookup's page", resp.StatusCode, loc)
	}
	return loc
}
