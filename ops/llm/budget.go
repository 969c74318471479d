package llm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/settle-dev/settle/ops"
)

// ReasonBudgetSpent is the reason of a call refused with 429 because its tenant's LLM spend
// of the current UTC day reached its budget.
const ReasonBudgetSpent = "tenant_budget_spent"

// ReasonModelNotPriced is the reason of a call of a tenant with an LLM budget refused because
// the price table has no price for its model.
const ReasonModelNotPriced = "model_not_priced"

// SpendStore reads a tenant's LLM budget per day (0: none) and what its LLM operations opened
// on the UTC day that starts at day cost in currency, in micro-units; ops/pg's DB is one.
type SpendStore interface {
	LLMSpend(ctx context.Context, tenantID int64, day time.Time, currency string) (budget, spent int64, err error)
}

// DefaultBudgetRefresh is how long a replica trusts the spend it read of a tenant.
const DefaultBudgetRefresh = 5 * time.Second

// budgetReadShare bounds what the spend's reads cost: a tenant's spend is trusted for at
// least this many times as long as its last read took. The read sums the tenant's LLM calls
// of the day so far, so it grows through the day with a busy tenant's calls (a tenant at 10
// calls a second has 864,000 by midnight); without the bound a replica would spend its
// database connection re-reading one busy tenant's day every few seconds. The price is a
// longer overshoot for such a tenant: a read of 100 ms is trusted for 5 s anyway, one of
// 1 s for 50 s.
const budgetReadShare = 50

// Budgets holds each tenant's LLM spend of the current UTC day as this replica last read it,
// so that a check costs no statement on the way of every call: a tenant's entry is read
// again once it is Refresh old, or the day changed. Meanwhile it counts what its own calls
// hold and cost (Hold), so the new calls one replica admits together fit what is left; the
// cap is still not exact across replicas: the calls every other replica admits within
// Refresh (or budgetReadShare times the last read's time, when longer) before it reads the
// spend again still run and are billed. Build it with NewBudgets; it is safe for
// concurrent use.
type Budgets struct {
	store    SpendStore
	clock    ops.Clock
	prices   *PriceTable
	currency string
	refresh  time.Duration

	mu      sync.Mutex
	tenants map[int64]*tenantSpend
	// refusals counts the calls refused for a spent budget (Refused), under mu.
	refusals map[refusalKey]uint64
}

// tenantSpend is one tenant's spend as last read; its mutex makes one caller read it while
// the others wait for that read instead of sending their own.
type tenantSpend struct {
	mu     sync.Mutex
	day    time.Time // the UTC day the spend is of
	readAt time.Time
	trust  time.Duration // how long the read is trusted: refresh, or longer after a slow read
	budget int64
	spent  int64
	// held is the worst cases of this replica's new calls admitted and not yet ended (Hold);
	// ended is what the calls that ended since the last read began cost, which that read
	// could not include: the read clears it, since a call ends (Hold.Ended, under mu) only
	// once its cost is written, and every read runs under mu.
	held, ended int64
}

// NewBudgets returns the budgets of tenants read from store, in the currency of prices (the
// table that costs the calls; dollars when nil), trusted for refresh (default
// DefaultBudgetRefresh) on clock.
func NewBudgets(store SpendStore, prices *PriceTable, clock ops.Clock, refresh time.Duration) *Budgets {
	if refresh <= 0 {
		refresh = DefaultBudgetRefresh
	}
	if clock == nil {
		clock = ops.SystemClock{}
	}
	return &Budgets{store: store, clock: clock, prices: prices, currency: prices.CurrencyOf(), refresh: refresh, tenants: map[int64]*tenantSpend{}}
}

// Check answers nil while the tenant may send a new paid call, and the refusal
// (ReasonBudgetSpent, naming the budget and when the day ends) once its spend of the day
// reached its budget. An error that is no refusal is the store's: the spend could not be read.
func (b *Budgets) Check(ctx context.Context, tenantID int64) error {
	_, err := b.check(ctx, tenantID, "", callSaid)
	return err
}

// CheckResend is Check of a resend of operation opID, whose earlier attempts were sent: its
// refusal says so, where a new call's says nothing was sent (ops rule 12).
func (b *Budgets) CheckResend(ctx context.Context, tenantID int64, opID string) error {
	_, err := b.check(ctx, tenantID, "", resendSaid(opID))
	return err
}

// CheckModel is Check of a pipeline job's generation of model, whose model the tenant did
// not choose and admission did not check (it comes from the operator's profiles, and the
// tenant may have had no budget when the job was submitted): a tenant with a budget is
// refused too when the price table does not price model (ReasonModelNotPriced), since such a
// call would cost nothing against the budget. opID is the generation a resend goes on with,
// "" for a new one. Its refusals speak of the job's generation.
func (b *Budgets) CheckModel(ctx context.Context, tenantID int64, model, opID string) error {
	refused := generationSaid
	if opID != "" {
		refused = generationResendSaid(opID)
	}
	_, err := b.check(ctx, tenantID, model, refused)
	return err
}

// spendNow is a tenant's budget and spend of the day as a check read them, at now; the
// budget resets at resets, midnight UTC. spent counts the calls this replica saw end since
// the read; held is the worst cases of its calls in flight.
type spendNow struct {
	budget, spent, held int64
	now, resets         time.Time
}

// check is Check, its refusal saying refused of the call it refuses; a model other than ""
// is refused when the tenant has a budget and the price table does not price it. It
// returns the spend it checked against.
func (b *Budgets) check(ctx context.Context, tenantID int64, model string, refused said) (spendNow, error) {
	sp, _, err := b.admit(ctx, tenantID, model, refused, nil)
	return sp, err
}

// admit is check that, when fits is not nil and the spend does not refuse the call, asks
// fits under the tenant's lock whether the new call fits what sp leaves, and holds the worst
// case fits answers until the call ends (Hold): the next call admitted meanwhile sees it
// held, so two calls in flight are never each given the same leftover.
func (b *Budgets) admit(ctx context.Context, tenantID int64, model string, refused said, fits func(spendNow) (int64, error)) (spendNow, *Hold, error) {
	if b == nil {
		return spendNow{}, nil, nil
	}
	now := b.clock.Now().UTC()
	day := now.Truncate(24 * time.Hour)
	s := b.entry(tenantID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.day.Equal(day) || now.Sub(s.readAt) >= s.trust || now.Before(s.readAt) {
		budget, spent, err := b.store.LLMSpend(ctx, tenantID, day, b.currency)
		if err != nil {
			return spendNow{}, nil, fmt.Errorf("read the tenant's LLM spend: %w", err)
		}
		took := b.clock.Now().Sub(now)
		s.day, s.readAt, s.budget, s.spent, s.ended = day, now, budget, spent, 0
		s.trust = max(b.refresh, budgetReadShare*took)
	}
	sp := spendNow{budget: s.budget, spent: s.spent + s.ended, held: s.held, now: now, resets: day.Add(24 * time.Hour)}
	if s.budget > 0 && model != "" && !b.prices.Priced(model) {
		return sp, nil, ModelNotPriced(model, refused.did+" Ask the operator to price the model in SETTLE_LLM_PRICES, or to remove the tenant's budget.")
	}
	if s.budget > 0 && sp.spent >= s.budget {
		return sp, nil, b.refusal(s.budget, sp.spent, sp.resets, now, refused)
	}
	if fits == nil || s.budget <= 0 {
		return sp, nil, nil
	}
	worst, err := fits(sp)
	if err != nil || worst <= 0 {
		return sp, nil, err
	}
	s.held += worst
	return sp, &Hold{s: s, day: day, micros: worst}, nil
}

// CheckCall is CheckModel of a new call of size s: a tenant with a budget is refused too
// when the call's worst case costs more than what is left of the day's budget
// (ReasonBudgetTooSmall), its output cap being s.OutputCap (field, as its request names
// it), or than what its calls in flight on this replica leave of it (ReasonBudgetHeld, for
// seconds). A pipeline job's generation, whose
// model and cap are its profile's, is held so. The call's worst case is held until the
// Hold returned ends; nil when the tenant has no budget.
func (b *Budgets) CheckCall(ctx context.Context, tenantID int64, s CallSize, field string) (*Hold, error) {
	return b.checkCall(ctx, tenantID, s, capName{field: field})
}

// CheckGeneration is CheckCall of a pipeline job's generation, whose output cap is the
// max_tokens of its model profile: the client picks a profile by name, never the number,
// so a refusal tells it to choose another profile or send a shorter document.
func (b *Budgets) CheckGeneration(ctx context.Context, tenantID int64, s CallSize, profile string) (*Hold, error) {
	return b.checkCall(ctx, tenantID, s, capName{field: "max_tokens", profile: profile})
}

// checkCall is CheckCall, its refusal advising by how the client sets the cap (name).
func (b *Budgets) checkCall(ctx context.Context, tenantID int64, s CallSize, name capName) (*Hold, error) {
	_, h, err := b.admit(ctx, tenantID, s.Model, name.said(), func(sp spendNow) (int64, error) {
		f, err := b.fitNew(s, sp, name, 1, false)
		return f.hold, err
	})
	return h, err
}

// entry returns the tenant's entry, made on first use.
func (b *Budgets) entry(tenantID int64) *tenantSpend {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.tenants[tenantID]
	if !ok {
		s = &tenantSpend{}
		b.tenants[tenantID] = s
	}
	return s
}

// refusal tells the client its budget, what it spent, that nothing was sent, and when its
// budget is whole again; Retry-After says the same.
func (b *Budgets) refusal(budget, spent int64, resets, now time.Time, refused said) error {
	return &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonBudgetSpent, Err: &Problem{RetryAfter: resets.Sub(now)},
		Message: fmt.Sprintf("Your tenant's LLM budget of %s a day is spent (%s so far today, UTC); %s "+
			"The budget resets at %s; %s",
			ops.FormatMicrosExact(budget, b.currency), ops.FormatMicrosExact(spent, b.currency), refused.did, resets.Format(time.RFC3339),
			refused.afterReset())}
}

// budgetCheck is the check of a call of the exchange's tenant against its budget, for
// admission: nil for a tenant without a budget, or within it, which keeps the admission that
// tries the insert first. Admission asks the check only before it would open an operation, so
// a request of an existing one (a replay, a key in flight) is answered as always: a replay
// costs nothing (ops rules 1 and 2). A refusal is recorded as the tenant's refused request
// (ops rule 8). A spend that could not be read refuses new calls too, with the store's
// error: a cap that lapsed whenever its read failed would be none. So does a model the price
// table does not price: its calls would cost nothing in the spend, so a tenant could spend
// without limit through it. A new call (fresh) is held to what is left as well (fitCheck),
// its worst case held against the leftover until it ends (x.budgetHold).
// refused is what the refusal says of the call: newCallRefused, or resendRefused's sentence.
func (x *exchange) budgetCheck(ctx context.Context, refused said, fresh bool) func(context.Context) error {
	g, t := x.g, x.tenant
	if t.LLMBudgetMicros <= 0 || g.cfg.Budgets == nil {
		return nil
	}
	refusal := x.unpriced(refused)
	if refusal == nil && fresh {
		x.budgetHold.Unsent()
		_, x.budgetHold, refusal = g.cfg.Budgets.admit(ctx, t.ID, "", refused, x.fitCheck)
	} else if refusal == nil {
		_, refusal = g.cfg.Budgets.check(ctx, t.ID, "", refused)
	}
	if refusal == nil {
		return nil
	}
	return func(context.Context) error {
		g.stats.rejected.Add(1)
		g.cfg.Budgets.Refused(t.ID, ops.ErrorReason(refusal), x.apiLabel(), CallerGateway)
		return refusal
	}
}

// unpriced refuses a call whose model the price table has no price for, saying refused of it.
func (x *exchange) unpriced(refused said) error {
	if x.g.cfg.Prices.Priced(x.req.Model) {
		return nil
	}
	return ModelNotPriced(x.req.Model, refused.did+" Use a model the table prices, or ask the operator to price it (SETTLE_LLM_PRICES).")
}

// ModelNotPriced is the refusal (ReasonModelNotPriced, 422) of a call or a job of a tenant
// with an LLM budget whose model the price table does not price; then says what the refusal
// did and what to do. The gateway's calls and the pipeline's jobs are refused with it alike.
func ModelNotPriced(model, then string) error {
	return &ops.Error{Code: ops.EINVALID, Reason: ReasonModelNotPriced,
		Message: fmt.Sprintf("Your tenant has an LLM budget, and this server's price table has no price for the model %q, so what its calls cost could not be counted against the budget; %s", model, then)}
}

// budgetBeforeSend holds attempt a to tenant's budget, and to its share when the transport
// let the request in only to read or follow (resendCheck), unless it is first, the attempt of
// a new operation that admission checked, or it goes on with a background response an
// earlier attempt created (onlyFollows: nothing new is generated). Every other send is paid
// work the provider does now, whenever its operation was admitted: a resend of a key whose
// attempts the provider refused, or whose uncertain attempt a lookup did not find (the lookup
// comes first, so an answer found settles the operation whatever the budget). Admitting an
// operation within the budget must not let its client park it and send it after the budget
// is spent. A refused send is
// recorded as not sent, its operation stays open for its key (ops rule 11), and the client's
// request is recorded as refused (ops rule 8).
func (x *exchange) budgetBeforeSend(ctx context.Context, first, a *ops.Attempt) error {
	if first != nil && a.ID == first.ID {
		return nil
	}
	check := x.resendCheck(ctx, a)
	if check == nil {
		return nil
	}
	refusal := check(ctx)
	if x.crID != 0 {
		if err := x.g.cfg.Ledger.AnswerRefused(ctx, x.crID, refusal); err != nil {
			return errors.Join(refusal, fmt.Errorf("record the refused request: %w", err))
		}
	}
	return refusal
}

// newCallRefused is what a refusal of a new call says of it; a refused resend says
// resendRefused's sentence instead, since its operation's earlier attempts were sent
// (ops rule 12).
const newCallRefused = "this call was recorded as refused and nothing of it was sent."

// resendRefused is what a refusal of a resend of operation opID says of it.
func resendRefused(opID string) string {
	return fmt.Sprintf("this retry was recorded as refused and sent nothing more; its operation %s, whose earlier attempts were sent, stays open for its key and goes on with a retry once the budget allows.", opID)
}
