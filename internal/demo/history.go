package demo

import (
	"context"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/pg/rollupstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

// historyPlan is what the demo's history holds: how many days, how busy, until when.
type historyPlan struct {
	Days int
	// PerHour is the refunds of a busy weekday hour; nights, weekends and the LLM traffic
	// take a share of it.
	PerHour int
	// End is when the history stops and the live traffic takes over.
	End  time.Time
	Seed uint64
}

// storyline is when the history's incidents happen, relative to its end.
type storyline struct {
	stormFrom, stormTo time.Time // Stripe loses half the answers
	release            time.Time // a client release doubles the day's duplicate rate
	doubles            [2]time.Time
	doubleGeneration   time.Time
}

func newStoryline(p historyPlan) storyline {
	day := func(ago int) time.Time {
		return p.End.Add(-time.Duration(ago) * 24 * time.Hour).Truncate(24 * time.Hour)
	}
	storm := day(min(6, p.Days-1)).Add(14 * time.Hour)
	return storyline{
		stormFrom: storm, stormTo: storm.Add(40 * time.Minute),
		release: day(min(12, p.Days-1)),
		doubles: [2]time.Time{day(min(20, p.Days-1)).Add(10*time.Hour + 20*time.Minute),
			day(min(3, p.Days-1)).Add(16*time.Hour + 10*time.Minute)},
		doubleGeneration: day(min(9, p.Days-1)).Add(11*time.Hour + 30*time.Minute),
	}
}

// history writes the demo's past through the product's own write path: the refund tool
// and the LLM gateway on a ledger whose clock is simulated, against the demo's fake Stripe
// and fake LLM, with the rollup job, the reconciler, the reaper and the alert evaluator
// running on the same clock. Every figure the pages show is then one Settle computed.
type history struct {
	plan       historyPlan
	story      storyline
	db         *pg.DB
	tenant     *ops.Tenant
	stripe     *fake.Stripe
	stripeBase string
	llmFake    *fake.LLM // nil: no LLM traffic
	llmBase    string
	clock      *ops.ManualClock
	rnd        *mrand.Rand
	progress   Progress
	log        *slog.Logger

	ledger     *ops.Ledger
	refunds    *refund.Tool
	gateway    *llm.Gateway
	rollups    *recon.Rollups
	reconciler *recon.Reconciler
	evaluator  *alerts.Evaluator
	reaper     *ops.Reaper

	orders, chats int
	// clicks adds up the double-click rate of each customer; each whole one is a double click.
	// agains does the same for the customers who ask again after an answer that was not final.
	clicks, agains float64
	// doubleOps are the operations refunded twice; acted marks the people's steps done.
	doubleOps [2]string
	acted     [3]bool
	// alerting says the last evaluation left an alert pending, firing or recovering: the
	// evaluator then keeps running until none is, so each ends about when it would have.
	alerting bool
	// normal are the fake Stripe's everyday faults, put back after the storm.
	normal []fake.Fault
}

// historyFaults are the everyday faults of the history's Stripe: answers lost after the
// refund was made (counted as timeouts; the resend or the reconciler settles them) and rate
// limits, rarely. No saved 500s: their operations would wait for a person for the whole
// month, and the live demo shows two of them.
const historyFaults = `POST /v1/refunds drop_after_commit p=0.015
POST /v1/refunds rate_limit p=0.02 retry_after=1`

// historyActor is who the history's reconciler, reaper and evaluator are in leases and
// the audit log.
const historyActor = "demo-history"

// newHistory wires the services of the history on a simulated clock starting at the
// history's first hour.
func newHistory(db *pg.DB, tenant *ops.Tenant, st *fake.Stripe, stripeBase string, fl *fake.LLM, llmBase string,
	plan historyPlan, progress Progress, logger *slog.Logger) (*history, error) {
	start := plan.End.Add(-time.Duration(plan.Days) * 24 * time.Hour).Truncate(time.Hour)
	h := &history{plan: plan, story: newStoryline(plan), db: db, tenant: tenant, stripe: st, stripeBase: stripeBase,
		llmFake: fl, llmBase: llmBase, clock: ops.NewManualClock(start), rnd: mrand.New(mrand.NewPCG(plan.Seed, 23)),
		progress: progress, log: logger}
	h.ledger = ops.NewLedger(db, h.clock)
	// The kinds as serve registers them, pipeline jobs never resending an uncertain attempt.
	h.ledger.Register(refund.Kind(), llm.Kind(), jobs.Kind(false))
	// Backoff moves the simulated clock instead of sleeping.
	sleep := func(_ context.Context, d time.Duration) error { h.clock.Advance(d); return nil }
	// The fake answers from memory on loopback: the read limits that keep a real account
	// under Stripe's own would only make the month take hours.
	adapter := stripe.New(stripe.Config{APIKey: "sk_test_demo", BaseURL: stripeBase, AttemptTimeout: 2 * time.Second, Accounts: db,
		ReadsPerSecond: 1e6})
	h.refunds = &refund.Tool{Ledger: h.ledger, Store: db, Provider: adapter, Deadline: 10 * time.Second, Sleep: sleep}
	h.reconciler = &recon.Reconciler{Ledger: h.ledger, Store: reconstore.New(db), Events: db, Leases: db, Owner: historyActor, Refunds: []recon.RefundSource{adapter},
		Logger: logger}
	h.rollups = &recon.Rollups{Store: rollupstore.New(db), Clock: h.clock, Logger: logger}
	as := alertstore.New(db)
	h.evaluator = &alerts.Evaluator{Rules: alerts.DefaultRules(), Source: as, Store: as, Clock: h.clock,
		Lease: 3 * time.Second, Logger: logger}
	senders := map[ops.Kind]ops.Sender{ops.KindRefund: adapter}
	if fl != nil {
		if err := h.wireLLM(sleep); err != nil {
			return nil, err
		}
	}
	h.reaper = &ops.Reaper{Ledger: h.ledger, Owner: ops.NewOwner("reaper", historyActor), Senders: senders,
		Sleep: sleep, Logger: logger}
	var err error
	if h.normal, err = fake.ParseFaults(historyFaults); err != nil {
		return nil, err
	}
	return h, nil
}

// wireLLM builds the history's LLM gateway, which stores completions so the reconciler can
// look unknown calls up, and hands its usage report to the reconciler.
func (h *history) wireLLM(sleep ops.Sleeper) error {
	up, err := openai.New(openai.Config{Name: "openai", BaseURL: h.llmBase, APIKey: "sk-demo", AttemptTimeout: 300 * time.Millisecond,
		Store: openai.StoreMode("on")})
	if err != nil {
		return err
	}
	prices := llm.DefaultPrices()
	h.gateway, err = llm.New(llm.Config{Ledger: h.ledger, Upstream: up, Prices: prices, Mode: llm.Interactive,
		Deadline: 20 * time.Second, Sleep: sleep, Logger: h.log, Stored: up, Reconciled: true})
	if err != nil {
		return err
	}
	lookups := &llm.Lookups{Ledger: h.ledger, Events: h.db, Store: up, Prices: prices}
	h.reconciler.Usage = []recon.UsageSource{&openai.UsageReader{Provider: "openai", BaseURL: trimV1(h.llmBase), APIKey: "sk-demo",
		Lookups: lookups, Limiter: rate.NewLimiter(rate.Inf, 1)}}
	return nil
}

// Run writes the history hour by hour, then runs the services once more at its end.
func (h *history) Run(ctx context.Context, fakes *fakeClock) error {
	fakes.sim.Store(h.clock)
	defer fakes.sim.Store(nil)
	h.setFaults(false)
	defer h.stripe.ClearFaults()
	if h.llmFake != nil {
		live := h.llmFake.Faults()
		h.setLLMFaults()
		defer func() {
			h.llmFake.ClearFaults()
			for _, f := range live {
				h.llmFake.AddFault(f)
			}
		}()
	}
	start, end := h.clock.Now(), h.plan.End
	h.progress.Start(int((end.Sub(start)+time.Hour-1)/time.Hour), "hours")
	defer h.progress.Done()
	for at := start; at.Before(end); at = at.Add(time.Hour) {
		if err := h.hour(ctx, at, earliest(at.Add(time.Hour), end)); err != nil {
			return fmt.Errorf("demo history at %s: %w", at.Format(time.RFC3339), err)
		}
		h.progress.Add(1)
	}
	return h.services(ctx, end)
}

// advance moves the simulated clock to t, never back: a call's backoff may have taken it
// past the next event.
func (h *history) advance(t time.Time) {
	if t.After(h.clock.Now()) {
		h.clock.Set(t)
	}
}

// setFaults switches the fake Stripe between its everyday faults and the storm, where half
// the answers are lost after the refund was made.
func (h *history) setFaults(storm bool) {
	h.stripe.ClearFaults()
	if storm {
		h.stripe.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultDropAfterCommit, Probability: 0.5})
	}
	for _, f := range h.normal {
		h.stripe.AddFault(f)
	}
}

// trimV1 is the base of the provider's usage report: {base}/usage sits beside the API of
// an OpenAI-style ".../v1" base.
func trimV1(base string) string {
	return strings.TrimSuffix(strings.TrimSuffix(base, "/"), "/v1")
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// History writes days of history into db, a new demo database whose schema is migrated,
// for the demo's tenant, before the server starts, so the pages open on a month of
// figures and the live traffic continues from now. A database that already ran keeps what
// it has: its rollups are past the history's times.
func History(ctx context.Context, db *pg.DB, days int, f *Fakes, progress Progress, logger *slog.Logger) error {
	st, err := rollupstore.New(db).RollupStatus(ctx)
	if err != nil {
		return err
	}
	if st.Ran() {
		logger.Info("demo history: this database already has its own, so none is written", "counted_until", st.MinutesUntil)
		return nil
	}
	tn, err := db.EnsureTenant(ctx, tenantName)
	if err != nil {
		return err
	}
	// The history's LLM calls go at full speed; the live ones at a person's pace.
	f.LLM.SetPace(0, 0)
	defer f.LLM.SetPace(demoLLMLatency, demoLLMChunkDelay)
	started := time.Now()
	// It ends a minute ago, so the live services take over the roles it held at once.
	plan := historyPlan{Days: days, PerHour: demoHistoryPerHour, End: started.UTC().Truncate(time.Minute).Add(-time.Minute),
		Seed: uint64(started.UnixNano())}
	if err := writeHistory(ctx, db, tn, f, plan, progress, logger); err != nil {
		return err
	}
	logger.Info("demo history written", "days", plan.Days, "took", time.Since(started).Round(time.Millisecond))
	return nil
}

// demoHistoryPerHour is the demo's refunds in a busy weekday hour: about two thousand
// refunds and seven hundred chat messages over a month.
const demoHistoryPerHour = 6

// writeHistory writes a history of plan into db for tenant, with progress reported on
// progress (nil reports nothing).
func writeHistory(ctx context.Context, db *pg.DB, tenant *ops.Tenant, f *Fakes, plan historyPlan, progress Progress,
	logger *slog.Logger) error {
	if progress == nil {
		progress = noProgress{}
	}
	h, err := newHistory(db, tenant, f.Stripe, f.StripeBase, f.LLM, f.LLMBase, plan, progress, logger)
	if err != nil {
		return err
	}
	return h.Run(ctx, f.clock)
}
