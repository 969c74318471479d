package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/pg/reconstore"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/refund"
)

// event is one client's call in the history, at its time.
type event struct {
	at time.Time
	do func(context.Context) error
}

// The history's double-click rates. On an ordinary day double clicks and customers asking
// again make about one request in ten a duplicate; the release day's clicks double that.
const (
	doubleClickRate        = 0.08
	releaseDoubleClickRate = 0.24
	// askAgainRate is the share of customers who ask again after an answer that was not final.
	askAgainRate = 0.5
)

// historyLLMFaults are the fake LLM's faults while the history is written: refusals the
// gateway retries, never a timeout, so the one double generation is the story's.
const historyLLMFaults = `rate_limit p=0.03 retry_after=1
server_error p=0.02`

// hour writes one hour of the history: the clients' calls in time order, then the hourly
// services, then the alert evaluator where the story needs it. Around the storm the hour
// goes in steps of three minutes with the evaluator after each, so its alert goes pending,
// fires and resolves at the minutes it would live.
func (h *history) hour(ctx context.Context, from, to time.Time) error {
	s := h.story
	stormFrom, stormTo := s.stormFrom.Add(-5*time.Minute), s.stormTo.Add(45*time.Minute)
	step := time.Hour
	if !to.Before(stormFrom) && from.Before(stormTo) {
		step = 3 * time.Minute
	}
	events := h.schedule(from, to)
	i := 0
	for at := from; at.Before(to); at = at.Add(step) {
		end := earliest(at.Add(step), to)
		h.setFaults(!at.Before(s.stormFrom) && at.Before(s.stormTo))
		for ; i < len(events) && events[i].at.Before(end); i++ {
			h.advance(events[i].at)
			if err := events[i].do(ctx); err != nil {
				return err
			}
		}
		h.advance(end)
		if end.Before(to) && !end.Before(stormFrom) && end.Before(stormTo) {
			if err := h.evaluate(ctx); err != nil {
				return err
			}
		}
	}
	if err := h.services(ctx, to); err != nil {
		return err
	}
	if h.watched(to) || (!to.Before(stormFrom) && to.Before(stormTo)) {
		return h.evaluate(ctx)
	}
	return nil
}

// watched says whether the alert evaluator runs at the end of an hour: evaluating every
// hour of a month takes longer than writing it, so the history evaluates where its story
// has something to say (the release day every other hour, the hours after a double charge
// or the double generation, the storm), while an alert is active, and at its end. Live
// Settle evaluates every minute.
func (h *history) watched(end time.Time) bool {
	s := h.story
	within := func(from time.Time, d time.Duration) bool { return end.After(from) && !end.After(from.Add(d)) }
	switch {
	case h.alerting:
		// Every four hours, as the services older than a week run.
		return end.Hour()%4 == 0
	case within(s.release, 25*time.Hour):
		return end.Hour()%2 == 0
	case within(s.doubles[0], 5*time.Hour), within(s.doubles[1], 5*time.Hour), within(s.doubleGeneration, 5*time.Hour):
		// Until the reconciler, every four hours there, has found it.
		return end.Hour()%4 == 0 || !end.Before(h.plan.End.Add(-7*24*time.Hour))
	}
	return !end.Before(h.plan.End)
}

// evaluate runs the alert evaluator once and notes whether an alert is still active.
func (h *history) evaluate(ctx context.Context) error {
	if _, err := h.evaluator.RunOnce(ctx); err != nil {
		return err
	}
	active, err := h.evaluator.Store.AlertInstances(ctx)
	h.alerting = len(active) > 0
	return err
}

// volume is how many refunds the hour starting at t gets: busy weekday office hours,
// quiet nights, weekends at a third.
func (h *history) volume(t time.Time) int {
	base := float64(h.plan.PerHour)
	if t.Hour() < 8 || t.Hour() >= 20 {
		base /= 4
	}
	if wd := t.Weekday(); wd == time.Saturday || wd == time.Sunday {
		base /= 3
	}
	return int(base*(0.8+0.4*h.rnd.Float64()) + h.rnd.Float64())
}

// schedule draws the hour's calls at random minutes, with the storm's busy minutes and
// the story's incidents at their times.
func (h *history) schedule(from, to time.Time) []event {
	var out []event
	at := func() time.Time { return from.Add(time.Duration(h.rnd.Int64N(int64(to.Sub(from))))) }
	dup := doubleClickRate
	if !from.Before(h.story.release) && from.Before(h.story.release.Add(24*time.Hour)) {
		dup = releaseDoubleClickRate
	}
	n := h.volume(from)
	for range n {
		out = append(out, event{at(), func(ctx context.Context) error { return h.customer(ctx, dup) }})
	}
	for range n / 3 {
		if h.gateway != nil {
			out = append(out, event{at(), h.chat})
		}
	}
	// The storm's hour is a sale: a refund every 40 seconds, so the alert has its numbers.
	for t := latest(from, h.story.stormFrom.Add(-20*time.Minute)); t.Before(earliest(to, h.story.stormTo.Add(20*time.Minute))); t = t.Add(40 * time.Second) {
		out = append(out, event{t, func(ctx context.Context) error { return h.customer(ctx, dup) }})
	}
	for i, t := range h.story.doubles {
		if !t.Before(from) && t.Before(to) {
			out = append(out, event{t, func(ctx context.Context) error { return h.doubleCharge(ctx, i) }})
		}
	}
	if t := h.story.doubleGeneration; h.gateway != nil && !t.Before(from) && t.Before(to) {
		out = append(out, event{t, h.doubleGeneration})
	}
	slices.SortStableFunc(out, func(a, b event) int { return a.at.Compare(b.at) })
	return out
}

// customer is one support conversation: a refund, sometimes double-clicked, sometimes
// asked for again when the first answer was not final.
func (h *history) customer(ctx context.Context, dup float64) error {
	req := h.newRefund()
	ans, err := h.refunds.Refund(ctx, req)
	if err != nil {
		return h.tolerate(err)
	}
	// Double clicks and second asks come at their rates exactly rather than by chance, so
	// a day's duplicate rate depends on the day's clients and faults, not on the draw.
	if h.clicks += dup; h.clicks >= 1 {
		h.clicks--
		h.clock.Advance(700 * time.Millisecond)
		req.RequestRef += "_click"
		if _, err := h.refunds.Refund(ctx, req); err != nil {
			return h.tolerate(err)
		}
	}
	if ans.Status == refund.Refunded || ans.Status == refund.Failed {
		return nil
	}
	if h.agains += askAgainRate; h.agains >= 1 {
		h.agains--
		h.clock.Advance(3 * time.Minute)
		req.RequestRef += "_again"
		_, err = h.refunds.Refund(ctx, req)
	}
	return h.tolerate(err)
}

// newRefund is a refund request of a new order, in dollars mostly and in euros sometimes,
// with its payment at the fake Stripe.
func (h *history) newRefund() refund.Request {
	h.orders++
	order := fmt.Sprintf("h%d", 10000+h.orders)
	cents, currency := int64(500+h.rnd.IntN(60)*100), "usd"
	if h.rnd.IntN(5) == 0 {
		currency = "eur"
	}
	pi := "pi_" + order
	h.stripe.AddPaymentIntent(pi, cents+1000, currency, fake.OwnedBy(h.tenant.Name))
	return refund.Request{TenantID: h.tenant.ID, Tenant: h.tenant.Name, OrderID: order, AmountCents: cents, Currency: currency,
		PaymentIntent: pi, Reason: "requested_by_customer", RequestRef: "call_" + order}
}

// tolerate lets the history go on past an answer a client would have seen as an error (a
// refusal, a deadline), and stops it only when it was cancelled.
func (h *history) tolerate(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	h.log.Debug("demo history: a call failed", "err", err)
	return nil
}

// doubleCharge is a refund that goes through, then an old script refunds the same order
// the same amount again at Stripe, outside Settle: the reconciler finds the double charge.
func (h *history) doubleCharge(ctx context.Context, i int) error {
	h.stripe.ClearFaults()
	defer h.setFaults(false)
	req := h.newRefund()
	// The script refunds the same amount again, so the payment covers both refunds.
	req.PaymentIntent += "_twice"
	h.stripe.AddPaymentIntent(req.PaymentIntent, 2*req.AmountCents, req.Currency, fake.OwnedBy(h.tenant.Name))
	ans, err := h.refunds.Refund(ctx, req)
	if err != nil {
		return err
	}
	h.clock.Advance(4 * time.Minute)
	refundOutside(h.stripeBase, req.PaymentIntent, req.AmountCents, ans.OperationID, h.log)
	h.doubleOps[i] = ans.OperationID
	return nil
}

// chat is one chat message through the gateway: sometimes double-clicked, sometimes sent
// again by the app a little later, both answered from the stored completion.
func (h *history) chat(ctx context.Context) error {
	h.chats++
	if err := h.send(ctx, h.chats); err != nil {
		return err
	}
	switch roll := h.rnd.IntN(100); {
	case roll < 12:
		h.clock.Advance(600 * time.Millisecond)
		return h.send(ctx, h.chats)
	case roll < 20:
		h.clock.Advance(2 * time.Minute)
		return h.send(ctx, h.chats)
	}
	return nil
}

// send sends chat message n with its Idempotency-Key to the API the live demo sends it to
// (ChatCall): chat completions, the Responses API or embeddings.
func (h *history) send(ctx context.Context, n int) error {
	route, body, _ := ChatCall(n)
	return h.sendTo(ctx, n, route, body)
}

// sendTo sends message n to a gateway route.
func (h *history) sendTo(ctx context.Context, n int, route string, body map[string]any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	err = h.gateway.Complete(ctx, llm.Request{Tenant: h.tenant, Route: route, Key: fmt.Sprintf("history-msg-%d", n), HasKey: true,
		ContentType: "application/json", Body: bytes.NewReader(raw), ChatRef: fmt.Sprintf("chat-%d", 800+n%9)}, discardSink{})
	// A success is answered before its close is written: the history's clock moves on only
	// once it is, so the close carries the time of its call.
	if derr := h.gateway.Drain(ctx); derr != nil {
		return errors.Join(h.tolerate(err), derr)
	}
	return h.tolerate(err)
}

// doubleGeneration is a call whose every attempt the provider billed and then let time
// out, while its store showed each completion only minutes later: the gateway looks each
// uncertain attempt up before it resends, finds nothing yet, and resends within its budget;
// the app gives up, the reaper finds the call stalled and leaves it unknown, and the
// reconciler, once the store caught up, finds more than one stored completion for it.
func (h *history) doubleGeneration(ctx context.Context) error {
	h.llmFake.ClearFaults()
	h.llmFake.AddFault(fake.LLMFault{Kind: fake.LLMFaultBillThenTimeout, Delay: time.Second, Times: ops.DefaultLimits.AttemptsPerCall,
		Lag: 10 * time.Minute})
	defer h.setLLMFaults()
	h.chats++
	// A chat completion: the provider's stored completions are what the reconciler finds twice.
	return h.sendTo(ctx, h.chats, "/v1/chat/completions", demoChatBody(h.chats))
}

// setLLMFaults puts the history's everyday LLM faults in place.
func (h *history) setLLMFaults() {
	h.llmFake.ClearFaults()
	faults, _ := fake.ParseLLMFaults(historyLLMFaults)
	for _, f := range faults {
		h.llmFake.AddFault(f)
	}
}

// discardSink takes the gateway's answers as a client that only needs them sent.
type discardSink struct{}

func (discardSink) Begin(llm.Head) error { return nil }
func (discardSink) Write([]byte) error   { return nil }

// services runs, at the end of an hour, what runs in the background of a live Settle: the
// reaper, the reconciler, the rollup job (each of which catches up with what it missed),
// then what people on call did that hour.
func (h *history) services(ctx context.Context, at time.Time) error {
	h.advance(at)
	if at.Before(h.plan.End.Add(-7*24*time.Hour)) && at.Hour()%4 != 0 {
		// Older than a week, the pages show days: a pass every four hours draws them as
		// well and keeps the month short to write.
		return h.people(ctx, at)
	}
	if _, err := h.reaper.RunOnce(ctx); err != nil {
		return fmt.Errorf("reaper: %w", err)
	}
	if _, err := h.reconciler.RunOnce(ctx); err != nil {
		return err
	}
	if _, err := h.rollups.CatchUp(ctx); err != nil {
		return err
	}
	return h.people(ctx, at)
}

// people is the on-call engineers' part: the first double charge is resolved the next
// day; the second, and the double generation, are acknowledged and assigned.
func (h *history) people(ctx context.Context, at time.Time) error {
	const oncall = "oncall@demo.settle"
	s := h.story
	steps := []struct {
		due      time.Time
		provider string
		opID     string
		changes  []recon.ExceptionChange
	}{
		{s.doubles[0].Add(20 * time.Hour), "stripe", h.doubleOps[0], []recon.ExceptionChange{{Action: recon.ActionAcknowledge},
			{Action: recon.ActionResolve, Note: "The second refund came from the retired refund script; the customer keeps it as a goodwill gesture and the script is switched off."}}},
		{s.doubles[1].Add(2 * time.Hour), "stripe", h.doubleOps[1], []recon.ExceptionChange{{Action: recon.ActionAcknowledge},
			{Action: recon.ActionAssign, Assignee: "support@demo.settle", Note: "Ask the customer whether they were refunded twice before we claw the second refund back."}}},
		{s.doubleGeneration.Add(3 * time.Hour), "openai", "", []recon.ExceptionChange{{Action: recon.ActionAcknowledge},
			{Action: recon.ActionAssign, Assignee: "admin@demo.settle", Note: "Ask the provider for a credit for the extra generations."}}},
	}
	for i, st := range steps {
		if h.acted[i] || at.Before(st.due) {
			continue
		}
		// Until the reconciler has found it there is nothing to work on: the next hour then.
		done, err := h.change(ctx, st.provider, st.opID, oncall, st.changes)
		if err != nil {
			return err
		}
		h.acted[i] = done
	}
	return nil
}

// change applies a person's changes to the double charge of opID (any operation of the
// provider when opID is empty), through the exception workflow; done is false when the
// reconciler has not recorded it yet.
func (h *history) change(ctx context.Context, provider, opID, actor string, changes []recon.ExceptionChange) (done bool, err error) {
	exceptions := reconstore.New(h.db)
	list, err := exceptions.ListExceptions(ctx, recon.ExceptionFilter{Kind: recon.ExceptionDoubleCharge, Provider: provider, Limit: 50})
	if err != nil {
		return false, err
	}
	for _, ex := range list {
		if opID != "" && ex.OperationID != opID {
			continue
		}
		for _, c := range changes {
			cur, err := exceptions.GetException(ctx, ex.ID)
			if err != nil {
				return false, err
			}
			c.ID, c.Version, c.Actor, c.At = cur.ID, cur.Version, actor, h.clock.Now()
			if _, err := recon.ChangeException(ctx, exceptions, c); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	return false, nil
}
