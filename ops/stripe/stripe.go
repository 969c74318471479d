// Package stripe is the Stripe adapter of the ledger, on stripe-go v76: it sends refunds
// with the operation's provider key, classifies every error into an attempt outcome, looks
// refunds up by our operation id, and verifies webhooks.
package stripe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
	"golang.org/x/time/rate"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/refund"
)

// MetadataKey is the metadata field that carries our operation id on every refund.
const MetadataKey = "settle_operation_id"

// Config configures the adapter.
type Config struct {
	APIKey string
	// BaseURL is Stripe's API base; tests and the demo point it at a fake.
	BaseURL string
	// AttemptTimeout bounds one HTTP send.
	AttemptTimeout time.Duration
	// Retention is how long Stripe keeps idempotency keys (at least 24 h for API v1).
	Retention     time.Duration
	WebhookSecret string
	// ConnectWebhookSecret signs the events of Stripe's Connect endpoint, the one that
	// receives connected accounts' events; it may point at the same URL as the account
	// endpoint, whose events WebhookSecret signs.
	ConnectWebhookSecret string
	// ReadsPerSecond caps lookups and listings, well under Stripe's read limit.
	ReadsPerSecond float64
	// TenantReadsPerSecond caps one tenant's share of them (default half of ReadsPerSecond),
	// so one tenant's burst of remainder checks and lookups cannot delay another's refunds.
	TenantReadsPerSecond float64
	// ListParts is how many parts of a reconciliation window are listed at once (default 2):
	// a listing reads page after page, each waiting for the one before, so one reader leaves
	// a core idle while Stripe answers. Every page still waits for the read limit.
	ListParts int
	// Accounts says which connected account each tenant is bound to; every call made for a
	// bound tenant carries it as Stripe-Account. Nil binds no tenant: every call goes to the
	// platform account.
	Accounts Accounts
}

// Adapter talks to Stripe for the refund tool.
type Adapter struct {
	api     *client.API // reads
	send    *client.API // refund creation, one connection per attempt
	cfg     Config
	limiter *rate.Limiter

	mu      sync.Mutex
	tenants map[int64]*rate.Limiter
	stats   ReadStats
}

// New returns an adapter with stripe-go's own retries turned off, so that every HTTP send
// is one attempt the ledger records.
func New(cfg Config) *Adapter {
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 8 * time.Second
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 24 * time.Hour
	}
	if cfg.ReadsPerSecond <= 0 {
		cfg.ReadsPerSecond = 20
	}
	if cfg.TenantReadsPerSecond <= 0 || cfg.TenantReadsPerSecond > cfg.ReadsPerSecond {
		cfg.TenantReadsPerSecond = cfg.ReadsPerSecond / 2
	}
	// Sends get a transport without keep-alive: net/http quietly resends a request carrying
	// an Idempotency-Key when a reused connection closes under it, and such a resend would be
	// an attempt nobody counted.
	sendTransport := http.DefaultTransport.(*http.Transport).Clone()
	sendTransport.DisableKeepAlives = true
	return &Adapter{
		api:     newAPI(cfg, http.DefaultTransport),
		send:    newAPI(cfg, sendTransport),
		cfg:     cfg,
		limiter: rate.NewLimiter(rate.Limit(cfg.ReadsPerSecond), 5),
		tenants: map[int64]*rate.Limiter{},
	}
}

// read waits for a tenant's share of Stripe reads and then for the account's, within ctx's
// deadline: a wait that would outlast it fails at once, so a call never spends its
// deadline queued behind another tenant. Tenant 0 is Settle's own work (reconciliation).
// A call whose own deadline ran out, or that was cancelled, is told so and not counted as a
// refusal of the caps: blaming the caps would say more than Settle knows (ops rule 12) and
// make them look too low.
func (a *Adapter) read(ctx context.Context, tenantID int64) error {
	a.mu.Lock()
	l, ok := a.tenants[tenantID]
	if !ok {
		l = rate.NewLimiter(rate.Limit(a.cfg.TenantReadsPerSecond), 2)
		a.tenants[tenantID] = l
	}
	a.mu.Unlock()
	started := time.Now()
	if err := a.wait(ctx, l, func(s *ReadStats) { s.RefusedTenant++ },
		"Too many Stripe reads for this account right now; try again in a moment."); err != nil {
		return err
	}
	if err := a.wait(ctx, a.limiter, func(s *ReadStats) { s.RefusedAccount++ },
		"Stripe is being read at its limit right now; try again in a moment."); err != nil {
		return err
	}
	waited := time.Since(started)
	a.count(func(s *ReadStats) { s.Reads++; s.Waited += waited })
	return nil
}

// wait waits for one read of l. A wait the cap refuses (it would outlast ctx's deadline) is
// counted by refused and answered with capMessage; a ctx already done, or done while
// waiting, is the call's own end.
func (a *Adapter) wait(ctx context.Context, l *rate.Limiter, refused func(*ReadStats), capMessage string) error {
	err := l.Wait(ctx)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return &ops.Error{Code: ops.EUNAVAILABLE,
			Message: "This call's time ran out before Stripe was read; nothing was asked of Stripe. Try again.",
			Err:     fmt.Errorf("stripe read: %w", context.Cause(ctx))}
	}
	a.count(refused)
	return &ops.Error{Code: ops.EUNAVAILABLE, Message: capMessage, Err: err}
}

// ReadStats are an adapter's reads at Stripe since it was made: those sent, those its caps
// refused because the wait would outlast the call (by the tenant's share or by the whole),
// and the time reads spent waiting on the caps. A growing refusal count or wait says the
// read caps (Config.ReadsPerSecond) are too low for the traffic.
type ReadStats struct {
	Reads                         uint64
	RefusedTenant, RefusedAccount uint64
	Waited                        time.Duration
}

// ReadStats returns the adapter's read counts so far.
func (a *Adapter) ReadStats() ReadStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

func (a *Adapter) count(f func(*ReadStats)) {
	a.mu.Lock()
	f(&a.stats)
	a.mu.Unlock()
}

func newAPI(cfg Config, rt http.RoundTripper) *client.API {
	hc := &http.Client{Timeout: cfg.AttemptTimeout + time.Second, Transport: &headerCatcher{next: rt}}
	bc := &stripego.BackendConfig{
		HTTPClient:        hc,
		MaxNetworkRetries: stripego.Int64(0),
		LeveledLogger:     &stripego.LeveledLogger{Level: stripego.LevelNull},
	}
	if cfg.BaseURL != "" {
		bc.URL = stripego.String(cfg.BaseURL)
	}
	return client.New(cfg.APIKey, &stripego.Backends{
		API:     stripego.GetBackendWithConfig(stripego.APIBackend, bc),
		Connect: stripego.GetBackendWithConfig(stripego.ConnectBackend, bc),
		Uploads: stripego.GetBackendWithConfig(stripego.UploadsBackend, bc),
	})
}

// Name implements refund.Provider.
func (a *Adapter) Name() string { return "stripe" }

// Retention implements refund.Provider.
func (a *Adapter) Retention() time.Duration { return a.cfg.Retention }

// Send implements ops.Sender: one POST /v1/refunds with the operation's key and id, in the
// account the operation was opened for (its tenant's connected account when it was bound
// to one).
func (a *Adapter) Send(ctx context.Context, op *ops.Operation, at *ops.Attempt) ops.AttemptResult {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.AttemptTimeout)
	defer cancel()
	account, err := a.opAccount(ctx, op)
	if err != nil {
		// Sent to no account rather than perhaps the wrong one.
		return ops.AttemptResult{Outcome: ops.OutcomeNotSent, ErrorCode: "account_unreadable"}
	}
	hdr := &caught{}
	ctx = context.WithValue(ctx, caughtKey{}, hdr)
	p := &stripego.RefundParams{
		PaymentIntent: stripego.String(op.PaymentRef),
		Amount:        stripego.Int64(op.AmountCents),
		Metadata:      map[string]string{MetadataKey: op.ID},
	}
	if r := refund.StoredReason(op); r != "" {
		p.Reason = stripego.String(r)
	}
	p.Context = ctx
	p.SetIdempotencyKey(op.ProviderKey)
	if account != "" {
		p.SetStripeAccount(account)
	}
	refund, err := a.send.Refunds.New(p)
	if err != nil {
		return Classify(err, hdr.header())
	}
	raw, _ := json.Marshal(refund)
	res := ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: http.StatusOK, ProviderRequestID: refund.LastResponse.RequestID}
	res.Result = &ops.Result{ProviderRef: refund.ID, ProviderRequestID: refund.LastResponse.RequestID, Body: raw}
	if refund.Status == stripego.RefundStatusFailed || refund.Status == stripego.RefundStatusCanceled {
		// Stripe took the request but the refund itself did not go through.
		return ops.AttemptResult{Outcome: ops.OutcomeInvalid, HTTPStatus: http.StatusOK, ErrorCode: "refund_" + string(refund.Status),
			ProviderRequestID: refund.LastResponse.RequestID}
	}
	return res
}

// Classify turns a stripe-go error into an attempt outcome (see package ops), with the error
// code to record and how long Stripe asked us to wait.
func Classify(err error, h http.Header) ops.AttemptResult {
	var se *stripego.Error
	if errors.As(err, &se) {
		r := ops.AttemptResult{HTTPStatus: se.HTTPStatusCode, ProviderRequestID: se.RequestID, ErrorCode: string(se.Code)}
		if r.ErrorCode == "" {
			r.ErrorCode = string(se.Type)
		}
		switch {
		case se.HTTPStatusCode == http.StatusConflict || se.Code == stripego.ErrorCodeIdempotencyKeyInUse:
			r.Outcome = ops.OutcomeKeyInUse
		case se.HTTPStatusCode == http.StatusTooManyRequests:
			r.Outcome, r.RetryAfter = ops.OutcomeRateLimited, retryAfter(h)
		case se.Type == stripego.ErrorTypeIdempotency:
			// Our key already ran with other parameters: what it did is not known from here.
			r.Outcome = ops.OutcomeServerError
		case se.HTTPStatusCode == http.StatusInternalServerError && h.Get("Stripe-Should-Retry") != "true":
			// Stripe saves a 500 under the key: every replay repeats it.
			r.Outcome = ops.OutcomeServerError
		case se.HTTPStatusCode >= 500:
			// 502/503/504 are not saved; what happened is unknown, and the key makes a resend safe.
			r.Outcome, r.RetryAfter = ops.OutcomeTimeout, retryAfter(h)
		default:
			// 400, 401, 402, 403, 404: Stripe refused, nothing was refunded.
			r.Outcome = ops.OutcomeInvalid
		}
		return r
	}
	var opErr *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &opErr) && opErr.Op == "dial":
		return ops.AttemptResult{Outcome: ops.OutcomeNotSent, ErrorCode: "connection_refused"}
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return ops.AttemptResult{Outcome: ops.OutcomeTimeout, ErrorCode: "timeout"}
	default:
		// The connection broke after the request may have left: the outcome is unknown.
		return ops.AttemptResult{Outcome: ops.OutcomeTimeout, ErrorCode: "connection_lost"}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func retryAfter(h http.Header) time.Duration {
	if h == nil {
		return 0
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// Payment implements refund.Provider: the payment intent and every refund on it, read in the
// tenant's connected account when it is bound to one, where another account's payment is
// as missing as one that does not exist.
func (a *Adapter) Payment(ctx context.Context, tenantID int64, paymentRef string) (refund.Payment, error) {
	account, err := a.accountOf(ctx, tenantID)
	if err != nil {
		return refund.Payment{}, err
	}
	if err := a.read(ctx, tenantID); err != nil {
		return refund.Payment{}, err
	}
	p := &stripego.PaymentIntentParams{}
	p.Context = ctx
	if account != "" {
		p.SetStripeAccount(account)
	}
	pi, err := a.api.PaymentIntents.Get(paymentRef, p)
	if err != nil {
		var se *stripego.Error
		if errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound {
			return refund.Payment{}, refund.UnknownPayment(paymentRef, err)
		}
		return refund.Payment{}, &ops.Error{Code: ops.EUNAVAILABLE, Message: "Stripe could not be asked what is left to refund; try again shortly.", Err: err}
	}
	refunds, err := a.list(ctx, tenantID, account, &stripego.RefundListParams{PaymentIntent: stripego.String(paymentRef)})
	if err != nil {
		return refund.Payment{}, err
	}
	amount := pi.AmountReceived
	if amount == 0 {
		amount = pi.Amount
	}
	return refund.Payment{Ref: pi.ID, AmountCents: amount, Currency: string(pi.Currency), Refunds: refunds, Metadata: pi.Metadata,
		Account: account}, nil
}

// Lookup implements refund.Provider. Refunds cannot be searched by metadata, so it lists
// the refunds of the operation's payment intent, in the account the operation was sent to
// even after its tenant moved to another, and keeps those carrying its id.
func (a *Adapter) Lookup(ctx context.Context, op *ops.Operation) (ops.LookupResult, error) {
	account, err := a.opAccount(ctx, op)
	if err != nil {
		return ops.LookupResult{}, err
	}
	all, err := a.list(ctx, op.TenantID, account, &stripego.RefundListParams{PaymentIntent: stripego.String(op.PaymentRef)})
	if err != nil {
		return ops.LookupResult{}, err
	}
	res := ops.LookupResult{OperationID: op.ID, CheckedAt: time.Now().UTC()}
	for _, r := range all {
		if r.OperationID == op.ID {
			res.Records = append(res.Records, r)
		}
	}
	return res, nil
}

// list reads every page of a refund listing in account ("" for the platform account) within
// the tenant's share of reads; each record carries the account.
func (a *Adapter) list(ctx context.Context, tenantID int64, account string, p *stripego.RefundListParams) ([]ops.ProviderRecord, error) {
	var out []ops.ProviderRecord
	err := a.listEach(ctx, tenantID, account, p, func(batch []ops.ProviderRecord) error {
		out = append(out, batch...)
		return nil
	})
	return out, err
}

// listBatch is how many listed refunds are handed on at a time: ten pages.
const listBatch = 1000

// listEach lists refunds page after page and hands them to each a batch at a time, so a
// listing of millions never sits in memory; an error from each stops the listing and is
// returned as it is.
func (a *Adapter) listEach(ctx context.Context, tenantID int64, account string, p *stripego.RefundListParams,
	each func([]ops.ProviderRecord) error) error {
	p.Context = ctx
	p.Limit = stripego.Int64(100)
	if account != "" {
		p.SetStripeAccount(account)
	}
	// Each page is one read request; wait for the bucket before each. List fetches the
	// first page itself, so the first wait comes before it.
	if err := a.read(ctx, tenantID); err != nil {
		return err
	}
	it := a.api.Refunds.List(p)
	batch := make([]ops.ProviderRecord, 0, listBatch)
	var page pageItems
	n := 0
	for it.Next() {
		n++
		if n%100 == 0 {
			if err := a.read(ctx, tenantID); err != nil {
				return err
			}
		}
		rec := recordWithRaw(it.Refund(), page.next(it.RefundList()))
		rec.Account = account
		if batch = append(batch, rec); len(batch) == listBatch {
			if err := each(batch); err != nil {
				return err
			}
			batch = make([]ops.ProviderRecord, 0, listBatch)
		}
	}
	if err := it.Err(); err != nil {
		return &ops.Error{Code: ops.EUNAVAILABLE, Message: "Stripe could not list refunds; try again shortly.", Err: err}
	}
	if len(batch) > 0 {
		return each(batch)
	}
	return nil
}

// Record converts a Stripe refund into a provider record.
func Record(r *stripego.Refund) ops.ProviderRecord {
	return recordWithRaw(r, nil)
}

// recordWithRaw is Record with the refund as Stripe wrote it, when the caller has it;
// otherwise the decoded refund is encoded again.
func recordWithRaw(r *stripego.Refund, raw json.RawMessage) ops.ProviderRecord {
	if raw == nil || !bytes.Contains(raw, []byte(strconv.Quote(r.ID))) {
		raw, _ = json.Marshal(r)
	}
	rec := ops.ProviderRecord{Provider: "stripe", Ref: r.ID, AmountCents: r.Amount, Currency: string(r.Currency),
		Status: string(r.Status), Created: time.Unix(r.Created, 0).UTC(), Raw: raw}
	if r.Metadata != nil {
		rec.OperationID = r.Metadata[MetadataKey]
	}
	if r.PaymentIntent != nil {
		rec.PaymentRef = r.PaymentIntent.ID
	}
	return rec
}

// headerCatcher hands each response's headers to the caller that asked for them through
// the request context: stripe-go's error type carries no Retry-After.
type headerCatcher struct{ next http.RoundTripper }

type caughtKey struct{}

type caught struct{ h http.Header }

func (c *caught) header() http.Header {
	if c == nil {
		return nil
	}
	return c.h
}

func (t *headerCatcher) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if c, ok := req.Context().Value(caughtKey{}).(*caught); ok && resp != nil {
		c.h = resp.Header.Clone()
	}
	return resp, err
}
