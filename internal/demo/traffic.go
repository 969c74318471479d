package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

// demoFaults is the fault mix of the demo's Stripe: mostly fine, with every failure the
// refund tool must survive.
//
// Outside the timeout storm, timeouts stay under the 14.4 % that pages, so the alert fires
// for the storm and then resolves.
const demoFaults = `POST /v1/refunds timeout_after_commit p=0.03 delay=5s
POST /v1/refunds server_error p=0.04
POST /v1/refunds rate_limit p=0.05 retry_after=1
POST /v1/refunds unavailable p=0.03
POST /v1/refunds drop_after_commit p=0.02
POST /v1/refunds refuse p=0.03
POST /v1/refunds slow p=0.1 delay=400ms`

// Traffic is the demo's live traffic: customers of the refund tool, the support agent over
// MCP, a chat backend and a document pipeline, played against the running Settle through
// its HTTP API, so every request takes the same path as a real one.
type Traffic struct {
	srv   Server
	fakes *Fakes
	// tenant is the demo's tenant and token one of its API tokens.
	tenant *ops.Tenant
	token  string
	// trialToken is the trial tenant's, made by its first message (TrialMessage).
	trialToken string
	log        *slog.Logger
	order      int
	// webhookURL is switched on after the history, whose lost answers must stay unknown.
	webhookURL string
	// backfill shows the history and lost answers being written, before the live traffic.
	backfill Progress
}

// Server is the running Settle the live traffic plays against.
type Server struct {
	// URL is where it serves its API, its MCP server and its webhooks.
	URL string
	DB  *pg.DB
	// Ledger is its ledger; Refunds its refund tool, nil when no Stripe is configured.
	Ledger  *ops.Ledger
	Refunds *refund.Tool
}

// NewTraffic is the live traffic of the demo's tenant against srv, calling with token, on
// the fakes srv is configured with; backfill shows the refunds written before the live
// traffic starts (nil shows nothing).
func NewTraffic(srv Server, fakes *Fakes, tenant *ops.Tenant, token string, backfill Progress, logger *slog.Logger) *Traffic {
	if backfill == nil {
		backfill = noProgress{}
	}
	return &Traffic{srv: srv, fakes: fakes, tenant: tenant, token: token, log: logger,
		webhookURL: srv.URL + "/webhooks/stripe", backfill: backfill}
}

// demoBackfillRefunds counts the refunds of the history and the lost answers.
const demoBackfillRefunds = 5

// Run plays the demo's traffic until ctx ends: the refunds of its story and of its past, then
// customers, the support agent, the chat backend, the trial tenant's chat backend and the
// document pipeline.
func (d *Traffic) Run(ctx context.Context) {
	if d.srv.Refunds != nil {
		d.backfill.Start(demoBackfillRefunds, "refunds")
	}
	if err := d.history(ctx); err != nil {
		d.log.Warn("demo history", "err", err)
	}
	if err := d.lostAnswers(ctx); err != nil {
		d.log.Warn("demo lost answers", "err", err)
	}
	d.backfill.Done()
	d.fakes.Stripe.SetWebhookURL(d.webhookURL)
	d.UnknownMessage(ctx)
	go d.chat(ctx)
	go d.trial(ctx)
	go d.pipeline(ctx)
	if err := d.story(ctx); err != nil {
		d.log.Warn("demo story", "err", err)
	}
	d.agentStory(ctx)
	faults, err := fake.ParseFaults(demoFaults)
	if err != nil {
		d.log.Error("demo faults", "err", err)
		return
	}
	for _, f := range faults {
		d.fakes.Stripe.AddFault(f)
	}
	go d.timeoutStorm(ctx, faults)
	rnd := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 7))
	tick := time.NewTicker(1500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		go d.customer(ctx, rnd.IntN(100), int64(500+rnd.IntN(40)*100))
	}
}

// timeoutStorm makes Stripe time out on half the refunds for three minutes, a minute after
// the demo starts, so the TimeoutRateHigh alert fires and, some minutes later, resolves.
func (d *Traffic) timeoutStorm(ctx context.Context, normal []fake.Fault) {
	sleep := func(t time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(t):
			return true
		}
	}
	if !sleep(time.Minute) {
		return
	}
	storm, _ := fake.ParseFaults("POST /v1/refunds timeout_after_commit p=0.5 delay=3s")
	d.fakes.Stripe.ClearFaults()
	for _, f := range append(storm, normal...) {
		d.fakes.Stripe.AddFault(f)
	}
	d.log.Info("demo: Stripe times out on half the refunds for 3 minutes")
	if !sleep(3 * time.Minute) {
		return
	}
	d.fakes.Stripe.ClearFaults()
	for _, f := range normal {
		d.fakes.Stripe.AddFault(f)
	}
	d.log.Info("demo: the Stripe timeout storm is over")
}

// story replays the refund agent's timeout then try again: order 4417, $38.00; the agent's
// first tool call times out while Stripe commits the refund; the customer says "try again";
// the second call reuses the key.
func (d *Traffic) story(ctx context.Context) error {
	d.fakes.Stripe.AddPaymentIntent("pi_4417", 3800, "usd", fake.OwnedBy(d.tenant.Name))
	d.fakes.Stripe.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultTimeoutAfterCommit, Delay: 8 * time.Second, Times: 1})
	req := map[string]any{"order_id": "4417", "amount_cents": 3800, "currency": "usd", "payment_intent": "pi_4417",
		"reason": "requested_by_customer", "request_ref": "toolu_01"}
	// The agent's tool call gives up after 3 s, as in the seed.
	if _, err := d.refund(ctx, req, 3*time.Second); err != nil {
		d.log.Info("demo story: toolu_01 timed out, as in the seed", "err", err)
	}
	time.Sleep(4 * time.Second)
	req["request_ref"] = "toolu_02"
	ans, err := d.refund(ctx, req, 30*time.Second)
	if err != nil {
		return err
	}
	d.log.Info("demo story: toolu_02 answered", "status", ans["status"], "operation", ans["operation_id"])
	return nil
}

// history leaves operations from yesterday that went wrong and were never settled: their
// keys are past Stripe's retention now, so the reaper marks them expired.
func (d *Traffic) history(ctx context.Context) error {
	if d.srv.Refunds == nil {
		return nil
	}
	yesterday := ops.NewManualClock(time.Now().Add(-30 * time.Hour))
	ledger := ops.NewLedger(d.srv.DB, yesterday)
	past := &refund.Tool{Ledger: ledger, Store: d.srv.DB, Provider: d.srv.Refunds.Provider, Deadline: 2 * time.Second}
	for i, order := range []string{"3120", "3121"} {
		pi := "pi_" + order
		d.fakes.Stripe.AddPaymentIntent(pi, 2500, "usd", fake.OwnedBy(d.tenant.Name))
		d.fakes.Stripe.AddFault(fake.Fault{Method: "POST", Path: "/v1/refunds", Kind: fake.FaultServerError, Times: 1})
		if _, err := past.Refund(ctx, refund.Request{TenantID: d.tenant.ID, Tenant: d.tenant.Name, OrderID: order, AmountCents: int64(1500 + i*500),
			Currency: "usd", PaymentIntent: pi, Reason: "requested_by_customer", RequestRef: "history"}); err != nil {
			return err
		}
		yesterday.Advance(17 * time.Minute)
		d.backfill.Add(1)
	}
	_, err := d.srv.Ledger.ExpireDue(ctx, "demo")
	return err
}

// lostAnswers leaves refunds that Stripe made but whose answers were lost, with a batch
// policy that does not resend: they wait in the Unknown queue for an on-call lookup to find
// the refund and close them.
func (d *Traffic) lostAnswers(ctx context.Context) error {
	if d.srv.Refunds == nil {
		return nil
	}
	ledger := ops.NewLedger(d.srv.DB, ops.SystemClock{})
	pol := refund.Kind().Policy
	pol.RetryUncertain = false
	provider := d.srv.Refunds.Provider
	worker := ops.NewOwner("worker", "demo")
	// Stripe refunds; the answer is then lost on the way back.
	lost := ops.SenderFunc(func(ctx context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
		provider.Send(ctx, op, a)
		return ops.AttemptResult{Outcome: ops.OutcomeTimeout, ErrorCode: "timeout"}
	})
	for _, order := range []string{"4520", "4521", "4522"} {
		pi := "pi_" + order
		d.fakes.Stripe.AddPaymentIntent(pi, 8400, "usd", fake.OwnedBy(d.tenant.Name))
		o, err := ledger.Admit(ctx, ops.Intent{TenantID: d.tenant.ID, Kind: ops.KindRefund, Provider: provider.Name(),
			IntentKey: refund.IntentKey(order, 4200, "usd"), Fingerprint: "demo-" + order, OrderRef: order,
			CustomerRef: "cus_" + order, PaymentRef: pi, AmountCents: 4200, Currency: "usd", Retention: provider.Retention(),
			Policy: &pol, RequestRef: "history", Owner: worker})
		if err != nil {
			return err
		}
		if !o.Created {
			continue // a demo database that ran before holds this story already
		}
		// The policy does not resend after a timeout: the run's one attempt leaves it unknown.
		if _, err := ledger.Run(ctx, o.Op, lost, ops.RunSpec{Owner: worker, First: o.Attempt}); err != nil {
			return err
		}
		if order == "4522" {
			// An old script refunds the same order again, the same amount, outside Settle and
			// without its key: the reconciler reports the double charge. (A refund of another
			// amount naming the operation is not its record but an orphan: ops.OutcomeOtherAmount.)
			d.outsideRefund(pi, 4200, o.Op.ID)
		}
		d.backfill.Add(1)
	}
	return nil
}

// outsideRefund creates a refund at the fake Stripe the way another system would.
func (d *Traffic) outsideRefund(pi string, cents int64, opID string) {
	refundOutside(d.fakes.StripeBase, pi, cents, opID, d.log)
}

// refundOutside creates a refund at the Stripe at base the way another system would:
// without Settle's key, naming the operation in its metadata as an old script copied it.
func refundOutside(base, pi string, cents int64, opID string, log *slog.Logger) {
	api := client.New("sk_test_outside", &stripego.Backends{API: stripego.GetBackendWithConfig(stripego.APIBackend,
		&stripego.BackendConfig{URL: stripego.String(base), MaxNetworkRetries: stripego.Int64(0),
			LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull}})})
	if _, err := api.Refunds.New(&stripego.RefundParams{PaymentIntent: stripego.String(pi), Amount: stripego.Int64(cents),
		Metadata: map[string]string{stripe.MetadataKey: opID}}); err != nil {
		log.Warn("demo outside refund", "err", err)
	}
}

// customer is one support conversation: a refund, sometimes double-clicked, sometimes asked
// for again a little later.
func (d *Traffic) customer(ctx context.Context, roll int, cents int64) {
	d.order++
	order := fmt.Sprintf("%d", 5000+d.order)
	pi := "pi_demo_" + order
	d.fakes.Stripe.AddPaymentIntent(pi, cents+1000, "usd", fake.OwnedBy(d.tenant.Name))
	req := map[string]any{"order_id": order, "amount_cents": cents, "currency": "usd", "payment_intent": pi,
		"reason": "requested_by_customer", "request_ref": "call_" + order + "_1"}
	switch {
	case roll < 20: // a double click: two identical requests at once
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := clone(req)
				r["request_ref"] = fmt.Sprintf("click_%s_%d", order, i)
				_, _ = d.refund(ctx, r, 10*time.Second)
			}()
		}
		wg.Wait()
	case roll < 35: // "try again" after an answer that was not final
		ans, _ := d.refund(ctx, req, 10*time.Second)
		if ans["status"] != refund.Refunded && ans["status"] != refund.Failed {
			time.Sleep(3 * time.Second)
			req["request_ref"] = "call_" + order + "_2"
			_, _ = d.refund(ctx, req, 10*time.Second)
		}
	default:
		_, _ = d.refund(ctx, req, 10*time.Second)
	}
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// refund calls POST /api/v1/refunds like a client service would, giving up after timeout.
func (d *Traffic) refund(ctx context.Context, body map[string]any, timeout time.Duration) (map[string]any, error) {
	out, _, err := d.post(ctx, "/api/v1/refunds", "", body, timeout)
	return out, err
}

// post sends body as JSON to path of Settle's API with the demo tenant's token, and key, if
// any, as its Idempotency-Key, giving up after timeout. It returns the decoded answer and
// the response, whose body is read and closed.
func (d *Traffic) post(ctx context.Context, path, key string, body map[string]any, timeout time.Duration) (map[string]any, *http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.srv.URL+path, bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, resp, fmt.Errorf("decode answer: %w", err)
	}
	return out, resp, nil
}
