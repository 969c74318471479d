// Package fake holds stateful fake providers that Settle's demo and tests point real clients
// at. The fake Stripe speaks enough of API v1 for stripe-go v76 to create, retrieve and list
// refunds against seeded payment intents, keeps Stripe's idempotency semantics (including
// the dangerous parts: saved 500s and forgotten keys), scopes objects to the connected
// account a request's Stripe-Account names, injects faults, and sends signed webhooks.
package fake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNotFound is returned (wrapped) when an id names nothing the fake knows.
var ErrNotFound = errors.New("not found")

// StripeOptions configures a fake Stripe.
type StripeOptions struct {
	// Retention is how long idempotency keys are kept; default 24h. After it a reused key
	// runs as a new request, which is how a late retry refunds twice.
	Retention time.Duration
	// Clock gives the time for object timestamps and key retention; default time.Now.
	Clock func() time.Time
	// Seed seeds the random source behind fault probabilities.
	Seed int64
	// WebhookURL, if set, receives signed events.
	WebhookURL string
	// WebhookSecret (whsec_...) signs the Stripe-Signature header.
	WebhookSecret string
	// Logger receives one line per request; default discards.
	Logger *slog.Logger
	// PendingRefunds creates refunds as pending, as Stripe does for some payment methods;
	// SetRefundStatus later moves them to succeeded, failed or canceled.
	PendingRefunds bool
}

// Refund is one refund as the fake's ledger records it.
type Refund struct {
	ID             string            `json:"id"`
	PaymentIntent  string            `json:"payment_intent"`
	Charge         string            `json:"charge"`
	Currency       string            `json:"currency"`
	Status         string            `json:"status"`
	Reason         string            `json:"reason,omitempty"`
	FailureReason  string            `json:"failure_reason,omitempty"`
	Amount         int64             `json:"amount"`
	Metadata       map[string]string `json:"metadata"`
	Created        time.Time         `json:"created"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	// Account is the connected account the refund was made in (the Stripe-Account of its
	// request), "" for the platform account.
	Account string `json:"account,omitempty"`
}

func (r *Refund) clone() Refund {
	c := *r
	c.Metadata = make(map[string]string, len(r.Metadata))
	for k, v := range r.Metadata {
		c.Metadata[k] = v
	}
	return c
}

// Payment intents, their charges and refunds belong to one account: a connected account
// (acct_…) or "" for the platform. A request sees only the objects of the account its
// Stripe-Account header names, as Stripe Connect does.
type paymentIntent struct {
	account  string
	id       string
	amount   int64
	currency string
	metadata map[string]string
	charge   string
	created  time.Time
}

type charge struct {
	account        string
	id             string
	paymentIntent  string
	amount         int64
	amountRefunded int64
	currency       string
	created        time.Time
}

// Stripe is a fake Stripe API v1 server. All of its state lives in the struct, behind mu.
type Stripe struct {
	retention     time.Duration
	clock         func() time.Time
	webhookURL    atomic.Value // string: set at start or by SetWebhookURL
	webhookSecret string
	log           *slog.Logger
	handler       http.Handler
	webhookClient *http.Client

	// done is closed by Close; handlers that are sleeping for a fault wake on it.
	done      chan struct{}
	closeOnce sync.Once
	// bg carries webhook deliveries; Close cancels it and waits for them.
	bg       context.Context
	cancelBG context.CancelFunc
	wg       sync.WaitGroup

	// srvMu guards srv and closed; closed stops new webhook goroutines from joining wg
	// while Close waits on it.
	srvMu  sync.Mutex
	srv    *http.Server
	closed bool

	// calls logs each API request's method, path and account, for tests to check what was
	// sent where; its own lock, so logging never waits for an endpoint.
	callsMu sync.Mutex
	calls   []Call

	mu       sync.Mutex
	intents  map[string]*paymentIntent
	charges  map[string]*charge
	refunds  []*Refund // the ledger, in creation order
	refundBy map[string]*Refund
	// refundPos is each refund's index in refunds, so a list page starts at its cursor
	// without a scan: a listing of a million refunds is ten thousand pages.
	refundPos map[string]int
	keys      map[string]*keyEntry
	events    []*eventRecord
	eventBy   map[string]*eventRecord

	faults *ruleSet[Fault]
	// pendingRefunds is StripeOptions.PendingRefunds.
	pendingRefunds bool
}

// NewStripe returns a fake Stripe with no payment intents and no faults.
func NewStripe(opts StripeOptions) *Stripe {
	if opts.Retention <= 0 {
		opts.Retention = 24 * time.Hour
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	bg, cancel := context.WithCancel(context.Background())
	s := &Stripe{
		retention:      opts.Retention,
		pendingRefunds: opts.PendingRefunds,
		clock:          opts.Clock,
		webhookSecret:  opts.WebhookSecret,
		log:            opts.Logger,
		webhookClient:  &http.Client{Timeout: 10 * time.Second},
		done:           make(chan struct{}),
		bg:             bg,
		cancelBG:       cancel,
		intents:        map[string]*paymentIntent{},
		charges:        map[string]*charge{},
		refundBy:       map[string]*Refund{},
		refundPos:      map[string]int{},
		keys:           map[string]*keyEntry{},
		eventBy:        map[string]*eventRecord{},
		faults:         newRuleSet[Fault](rand.New(rand.NewPCG(uint64(opts.Seed), uint64(opts.Seed)^0x5eed))),
	}
	s.webhookURL.Store(opts.WebhookURL)
	s.handler = s.routes()
	return s
}

// SetWebhookURL points signed events at url from now on ("" stops sending), for a
// receiver that starts after the fake.
func (s *Stripe) SetWebhookURL(url string) { s.webhookURL.Store(url) }

func (s *Stripe) hookURL() string { return s.webhookURL.Load().(string) }

// Handler returns the HTTP handler serving the Stripe API and the /_fake admin routes.
func (s *Stripe) Handler() http.Handler { return s.handler }

// Start listens on addr (loopback only; "" or ":0" means 127.0.0.1 on a free port) and
// serves in the background. It returns the base URL to give stripe-go.
func (s *Stripe) Start(addr string) (string, error) {
	addr, err := loopbackAddr(addr)
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("fake stripe: listen: %w", err)
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	s.srvMu.Lock()
	if s.srv != nil || s.closed {
		s.srvMu.Unlock()
		ln.Close()
		return "", errors.New("fake stripe: already started or closed")
	}
	s.srv = srv
	s.srvMu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("fake stripe: serve", "err", err)
		}
	}()
	return "http://" + ln.Addr().String(), nil
}

// loopbackAddr keeps the fake off every interface but loopback: it holds no real money, but
// it accepts any API key and its admin routes change state.
func loopbackAddr(addr string) (string, error) {
	if addr == "" {
		return "127.0.0.1:0", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("fake stripe: address %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if host != "localhost" {
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return "", fmt.Errorf("fake stripe: address %q: only loopback addresses are allowed", addr)
		}
	}
	return net.JoinHostPort(host, port), nil
}

// Close stops the server, wakes requests sleeping for a fault, cancels webhook deliveries
// and waits for them. It is safe to call more than once.
func (s *Stripe) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		s.srvMu.Lock()
		srv := s.srv
		s.closed = true
		s.srvMu.Unlock()
		if srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			if shutdownErr := srv.Shutdown(ctx); shutdownErr != nil {
				err = errors.Join(fmt.Errorf("fake stripe: shutdown: %w", shutdownErr), srv.Close())
			}
			cancel()
		}
		s.cancelBG()
		s.wg.Wait()
	})
	return err
}

// AddPaymentIntent seeds a succeeded payment intent with one charge (ch_...) of the whole
// amount. Seeding an id that exists leaves it as it is, so a demo can seed on every start.
// Metadata such as OwnedBy(tenant) labels the payment as a merchant's integration would.
func (s *Stripe) AddPaymentIntent(id string, amountCents int64, currency string, metadata ...map[string]string) {
	md := map[string]string{}
	for _, m := range metadata {
		maps.Copy(md, m)
	}
	if _, _, err := s.addPaymentIntent("", id, amountCents, currency, md); err != nil {
		s.log.Warn("fake stripe: payment intent not seeded", "id", id, "err", err)
	}
}

// AddConnectedPaymentIntent seeds a payment intent as AddPaymentIntent does, in the
// connected account (acct_…): only requests carrying Stripe-Account: account see it, refund
// it or list its refunds, as a Stripe Connect platform's calls on behalf of that account do.
func (s *Stripe) AddConnectedPaymentIntent(account, id string, amountCents int64, currency string, metadata ...map[string]string) error {
	md := map[string]string{}
	for _, m := range metadata {
		maps.Copy(md, m)
	}
	if !validAccount(account) || account == "" {
		return fmt.Errorf("fake stripe: account %q: want acct_ followed by letters and digits", account)
	}
	if _, _, err := s.addPaymentIntent(account, id, amountCents, currency, md); err != nil {
		return fmt.Errorf("fake stripe: seed %s in %s: %w", id, account, err)
	}
	return nil
}

// OwnedBy is the metadata that makes a payment a Settle tenant's: settle_tenant=name.
func OwnedBy(tenant string) map[string]string { return map[string]string{"settle_tenant": tenant} }

func (s *Stripe) addPaymentIntent(account, id string, amount int64, currency string, metadata map[string]string) (*paymentIntent, bool, error) {
	currency = strings.ToLower(strings.TrimSpace(currency))
	if amount <= 0 {
		return nil, false, fmt.Errorf("amount %d: must be positive", amount)
	}
	if len(currency) != 3 {
		return nil, false, fmt.Errorf("currency %q: want a three-letter ISO code", currency)
	}
	if id == "" {
		id = newID("pi_")
	}
	if !strings.HasPrefix(id, "pi_") {
		return nil, false, fmt.Errorf("payment intent id %q: must start with pi_", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if pi, ok := s.intents[id]; ok {
		if pi.account != account {
			return pi, false, fmt.Errorf("payment intent %s exists in %s", id, accountLabel(pi.account))
		}
		if pi.amount != amount || pi.currency != currency {
			return pi, false, fmt.Errorf("payment intent %s exists with %d %s", id, pi.amount, pi.currency)
		}
		return pi, false, nil
	}
	now := s.clock()
	ch := &charge{account: account, id: newID("ch_"), paymentIntent: id, amount: amount, currency: currency, created: now}
	pi := &paymentIntent{account: account, id: id, amount: amount, currency: currency, metadata: metadata, charge: ch.id, created: now}
	s.intents[id] = pi
	s.charges[ch.id] = ch
	return pi, true, nil
}

// AddFault appends a fault rule. Rules are checked in the order they were added.
func (s *Stripe) AddFault(f Fault) { s.faults.add(f) }

// ClearFaults removes every fault rule.
func (s *Stripe) ClearFaults() { s.faults.clear() }

// Faults returns the current rules.
func (s *Stripe) Faults() []Fault { return s.faults.list() }

// pickFault counts the request against every matching rule and returns the first rule that
// fires, or nil.
func (s *Stripe) pickFault(method, path string) *Fault {
	return s.faults.pick(func(f Fault) bool { return f.matches(method, path) }, Fault.timing)
}

// ImportRefunds adds refunds made before the fake started, oldest first, as a history to
// list and look up: no charge is debited and no event is sent. Each needs an id not taken
// and a creation time no earlier than the last refund's.
func (s *Stripe) ImportRefunds(rs []Refund) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range rs {
		r := rs[i].clone()
		if r.ID == "" || s.refundBy[r.ID] != nil {
			return fmt.Errorf("import refund %d: id %q is empty or taken", i, r.ID)
		}
		if n := len(s.refunds); n > 0 && r.Created.Before(s.refunds[n-1].Created) {
			return fmt.Errorf("import refund %s: created before the last refund", r.ID)
		}
		s.addRefundLocked(&r)
	}
	return nil
}

func (s *Stripe) addRefundLocked(r *Refund) {
	s.refundPos[r.ID] = len(s.refunds)
	s.refunds = append(s.refunds, r)
	s.refundBy[r.ID] = r
}

// Refunds returns every refund ever created, in creation order.
func (s *Stripe) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, len(s.refunds))
	for i, r := range s.refunds {
		out[i] = r.clone()
	}
	return out
}

// SetRefundStatus changes a refund's status (for example to "failed", as a bank bounce
// would) and emits refund.updated. A refund leaving succeeded or pending for failed or
// canceled gives its amount back to the charge's refundable remainder.
func (s *Stripe) SetRefundStatus(id, status, failureReason string) error {
	switch status {
	case "pending", "succeeded", "failed", "canceled", "requires_action":
	default:
		return fmt.Errorf("refund status %q: want pending, succeeded, failed, canceled or requires_action", status)
	}
	s.mu.Lock()
	r, ok := s.refundBy[id]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("refund %s: %w", id, ErrNotFound)
	}
	ch := s.charges[r.Charge]
	wasLive, isLive := refundHoldsMoney(r.Status), refundHoldsMoney(status)
	switch {
	case wasLive && !isLive:
		ch.amountRefunded -= r.Amount
	case !wasLive && isLive:
		if r.Amount > ch.amount-ch.amountRefunded {
			s.mu.Unlock()
			return fmt.Errorf("refund %s: charge %s no longer has %d left to refund", id, ch.id, r.Amount)
		}
		ch.amountRefunded += r.Amount
	}
	prev := map[string]any{"status": r.Status}
	if r.FailureReason != failureReason {
		prev["failure_reason"] = nullable(r.FailureReason)
	}
	r.Status = status
	r.FailureReason = ""
	if status == "failed" {
		r.FailureReason = failureReason
		if r.FailureReason == "" {
			r.FailureReason = "unknown"
		}
	}
	ev := s.newEventLocked(r.Account, "refund.updated", refundObject(r), prev, "", "")
	s.mu.Unlock()
	s.deliverAsync(ev)
	return nil
}

func refundHoldsMoney(status string) bool {
	return status != "failed" && status != "canceled"
}
