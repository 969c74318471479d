// Package testworld is Settle wired for real, for tests only: a fresh migrated database on
// the private test Postgres (ops/pg/pgtest, one cluster per test binary), the fake Stripe
// and the fake LLM on loopback (ops/fake), the adapters that call them, job workers, and
// the web server on that database. Every piece is stopped or dropped when the test ends.
//
// Only tests import it; production code never does.
package testworld

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
	"github.com/settle-dev/settle/web"
)

// Main runs the package's tests and then stops the test Postgres. Call it from TestMain.
func Main(m *testing.M) { pgtest.Main(m) }

// World is one test's Settle: its own database, and the fakes and servers it starts on it.
type World struct {
	t testing.TB
	// DB is the test's own migrated database, dropped when the test ends.
	DB *pg.DB
	// DatabaseURL is DB's connection string, for a program or process the test starts.
	DatabaseURL string
}

// New returns a world on a fresh migrated database.
func New(t testing.TB) *World {
	t.Helper()
	return On(t, pgtest.URL(pgtest.NewDatabase(t)))
}

// On returns a world on the migrated database at url, which the caller made and drops: for
// a test that needs a server of its own, such as a benchmark on a durable cluster.
func On(t testing.TB, url string) *World {
	t.Helper()
	db, err := pg.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("testworld: %v", err)
	}
	t.Cleanup(db.Close)
	return &World{t: t, DB: db, DatabaseURL: url}
}

// Stripe starts a fake Stripe on loopback and returns it with its base URL.
func (w *World) Stripe(o fake.StripeOptions) (*fake.Stripe, string) {
	w.t.Helper()
	f := fake.NewStripe(o)
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		w.t.Fatalf("testworld: %v", err)
	}
	w.t.Cleanup(func() { f.Close() })
	return f, base
}

// StripeAdapter is stripe-go pointed at a fake Stripe's base URL.
func (w *World) StripeAdapter(base string, c stripe.Config) *stripe.Adapter {
	c.BaseURL = base
	return stripe.New(c)
}

// LLM starts a fake LLM provider on loopback and returns it with its base URL.
func (w *World) LLM(o fake.LLMOptions) (*fake.LLM, string) {
	w.t.Helper()
	f := fake.NewLLM(o)
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		w.t.Fatalf("testworld: %v", err)
	}
	w.t.Cleanup(func() { f.Close() })
	return f, base
}

// RegisterKinds registers with l every kind of operation, each as its own package describes
// it and as serve registers them (the jobs' policy batch), and returns l.
func RegisterKinds(l *ops.Ledger) *ops.Ledger {
	l.Register(refund.Kind(), llm.Kind(), jobs.Kind(false))
	return l
}

// Ledger is a ledger on the world's database, on clock, with every kind registered.
func (w *World) Ledger(clock ops.Clock) *ops.Ledger {
	return RegisterKinds(ops.NewLedger(w.DB, clock))
}

// Upstream is the OpenAI adapter, the gateway's and the workers', pointed at base.
func (w *World) Upstream(base string, c openai.Config) llm.Upstream {
	w.t.Helper()
	c.BaseURL = base
	up, err := openai.New(c)
	if err != nil {
		w.t.Fatalf("testworld: %v", err)
	}
	return up
}

// JobWorker is a job worker on the world's database, calling up, on the system clock (its
// leases must run on real time) with the jobs' ledger of the given lease and policy.
func (w *World) JobWorker(up llm.Upstream, owner string, lease time.Duration, retryUncertain bool) *jobs.Worker {
	return &jobs.Worker{Store: jobstore.New(w.DB), Events: w.DB, Ledger: jobs.NewLedger(w.DB, ops.SystemClock{}, lease, retryUncertain), Upstream: up,
		Prices: llm.DefaultPrices(), Catalog: jobs.DefaultCatalog(), Owner: owner, Logger: slog.New(slog.DiscardHandler)}
}

// ConsumeJobEvents registers the test as the receiver of every tenant's job.published
// events, as a server with SETTLE_JOB_WEBHOOK_URL does: without one, a published job writes
// no event (ops rule 10). Call it before the jobs whose events the test reads are published.
func (w *World) ConsumeJobEvents() {
	w.t.Helper()
	if err := jobstore.New(w.DB).RegisterEventConsumer(context.Background(), "test", 0, time.Now()); err != nil {
		w.t.Fatalf("testworld: %v", err)
	}
}

// Jobs is the jobs service on the world's database, on the system clock.
func (w *World) Jobs() *jobs.Service {
	return &jobs.Service{Store: jobstore.New(w.DB), Ledger: ops.NewLedger(w.DB, ops.SystemClock{}), Catalog: jobs.DefaultCatalog(), Clock: ops.SystemClock{}}
}

// Server is the web server on the world's database: accounts, queues, readiness, sessions
// and the kinds of operation, on clock, logging nowhere. The test sets the areas it serves, then calls Serve.
func (w *World) Server(clock ops.Clock) *web.Server {
	// No session cleanup goroutine: it would outlive the test's database.
	return &web.Server{
		Accounts: Accounts(w.DB), Queues: deskstore.New(w.DB), DB: w.DB,
		Clock:    clock,
		Logger:   slog.New(slog.DiscardHandler),
		Sessions: web.NewSessions(w.DB.SessionStore(), false),
		Registry: prometheus.NewRegistry(),
		// Refused sign-ins are audited as in production.
		LoginDeps: web.LoginDeps{LoginAudit: deskstore.New(w.DB)},
		KindDeps:  web.KindDeps{Kinds: w.Ledger(clock)},
	}
}

// Accounts is the accounts' store on db for a test. Under -short it hashes passwords at
// bcrypt.MinCost: a test that signs in a few users would otherwise spend most of its CPU in
// bcrypt at the product's cost. Without -short it hashes as the product does, so the full
// run still signs in against real-cost hashes. A test whose assertion needs a hash's time
// (throttling, the cap on concurrent checks) makes its own store with accountstore.New.
func Accounts(db *pg.DB) *accountstore.Store {
	if testing.Short() {
		return accountstore.New(db, accountstore.WithHashCost(bcrypt.MinCost))
	}
	return accountstore.New(db)
}

// Serve serves h on loopback until the test ends and returns its URL.
func (w *World) Serve(h http.Handler) string {
	ts := httptest.NewServer(h)
	w.t.Cleanup(ts.Close)
	return ts.URL
}

// Tenant returns the tenant of that name, created if need be.
func (w *World) Tenant(name string) *ops.Tenant {
	w.t.Helper()
	tn, err := w.DB.EnsureTenant(context.Background(), name)
	if err != nil {
		w.t.Fatalf("testworld: %v", err)
	}
	return tn
}

// Token returns a new API token of the tenant.
func (w *World) Token(tenant *ops.Tenant, label string) string {
	w.t.Helper()
	tok, err := w.DB.CreateToken(context.Background(), tenant.ID, label)
	if err != nil {
		w.t.Fatalf("testworld: %v", err)
	}
	return tok
}
