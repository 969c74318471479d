package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/jobstore"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

var discard = slog.New(slog.DiscardHandler)

// sleep stands in for the waits between attempts: a tenth of what the rules ask, at most
// 100 ms. Backoff and Retry-After only pace the sends; what the rules decide by time runs on
// the manual clock.
func sleep(ctx context.Context, d time.Duration) error {
	return ops.SleepContext(ctx, min(d/10, 100*time.Millisecond))
}

// tune gives a ledger of the simulation short backoff; leases and retention stay as in
// production, since they run on the manual clock.
func tune(l *ops.Ledger) *ops.Ledger {
	l.Limits.BaseBackoff = 2 * time.Millisecond
	l.Limits.MaxBackoff = 10 * time.Millisecond
	l.Logger = discard
	return l
}

// refundSeen is what a client was told by the refund tool.
type refundSeen struct {
	intent string
	answer refund.Answer
	err    error
}

// chatSeen is what a client was told by the LLM gateway.
type chatSeen struct {
	intent string
	err    error
	began  bool
	head   llm.Head
	body   string
	// died says the process that served it was killed after its send: it may have
	// answered the client and died before writing the close.
	died bool
}

// sink is a client of the gateway reading its whole answer.
type sink struct {
	head  llm.Head
	began bool
	buf   bytes.Buffer
}

func (s *sink) Begin(h llm.Head) error {
	s.head, s.began = h, true
	return nil
}

func (s *sink) Write(p []byte) error {
	s.buf.Write(p)
	return nil
}

// crashingProvider is the Stripe adapter in a process that dies around its first send.
type crashingProvider struct {
	refund.Provider
	p    *proc
	at   string
	once sync.Once
}

func (c *crashingProvider) Send(ctx context.Context, op *ops.Operation, a *ops.Attempt) ops.AttemptResult {
	dies := false
	c.once.Do(func() { dies = true })
	if dies && c.at == crashBeforeSend {
		c.p.kill()
		return ops.AttemptResult{Outcome: ops.OutcomeNotSent, ErrorCode: "killed"}
	}
	res := c.Provider.Send(ctx, op, a)
	if dies {
		c.p.kill()
	}
	return res
}

// crashingUpstream is the LLM adapter in a process that dies around its first send.
type crashingUpstream struct {
	llm.Upstream
	p    *proc
	at   string
	once sync.Once
}

func (c *crashingUpstream) Send(ctx context.Context, call llm.Call) llm.Reply {
	dies := false
	c.once.Do(func() { dies = true })
	if dies && c.at == crashBeforeSend {
		c.p.kill()
		return llm.Reply{Outcome: ops.OutcomeNotSent, ErrorCode: "killed"}
	}
	r := c.Upstream.Send(ctx, call)
	if dies {
		c.p.kill()
	}
	return r
}

// seedRun is one schedule running: its clock, tenants, fakes and what its clients saw.
type seedRun struct {
	s       *schedule
	db      *pg.DB
	clock   *ops.ManualClock
	tenants []*ops.Tenant
	modes   map[string]llm.Mode
	// kinds is the registry of the kinds, as each process's ledger registers them.
	kinds *ops.Ledger

	stripe    *fake.Stripe
	stripeSrv *httptest.Server
	llm       *fake.LLM
	llmSrv    *httptest.Server
	llmHTTP   *http.Transport
	// inflight counts requests the fakes are still handling, a slow one that commits after
	// its client gave up included.
	inflight atomic.Int64
	adapter  *stripe.Adapter
	upstream *openai.Client

	bg    sync.WaitGroup
	reqNo atomic.Int64

	mu       sync.Mutex
	requests map[string][]string // the references of the client requests made, by tenant id and kind
	// told is what the client of each request was told, by the request's reference: a
	// request the ledger did not record is named with it.
	told    map[string]string
	jobKeys map[int64]map[string]bool
	refunds []refundSeen
	chats   []chatSeen
	// refunded holds the refund intents a client was told were refunded: a client that
	// knows does not ask again, since the same order and amount asked after its refund
	// closed is a new intent (a second partial refund of the payment).
	refunded map[string]bool
	notes    []string
}

func (r *seedRun) note(format string, args ...any) {
	r.mu.Lock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func reqKey(tenantID int64, k ops.Kind) string { return fmt.Sprintf("%d/%s", tenantID, k) }

func (r *seedRun) counted(tenantID int64, k ops.Kind, ref string) {
	r.mu.Lock()
	r.requests[reqKey(tenantID, k)] = append(r.requests[reqKey(tenantID, k)], ref)
	r.told[ref] = "no answer yet"
	r.mu.Unlock()
}

// counting counts the requests a fake is handling.
func (r *seedRun) counting(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.inflight.Add(1)
		defer r.inflight.Add(-1)
		h.ServeHTTP(w, req)
	})
}

// start builds the seed's world at base time: tenants, payments, the two fakes with the
// drawn faults, and the adapters that talk to them over loopback.
func start(ctx context.Context, db *pg.DB, s *schedule, base time.Time) (*seedRun, error) {
	r := &seedRun{s: s, db: db, clock: ops.NewManualClock(base), modes: map[string]llm.Mode{},
		requests: map[string][]string{}, told: map[string]string{}, jobKeys: map[int64]map[string]bool{}, refunded: map[string]bool{}}
	r.kinds = ops.NewLedger(nil, r.clock)
	registerKinds(r.kinds, s)
	for _, ts := range s.Tenants {
		t, err := db.EnsureTenant(ctx, ts.Name)
		if err != nil {
			return nil, err
		}
		r.tenants = append(r.tenants, t)
		if ts.Batch {
			r.modes[ts.Name] = llm.Batch
		}
	}
	r.stripe = fake.NewStripe(fake.StripeOptions{Clock: r.clock.Now, Seed: int64(s.Seed), Retention: retention})
	for _, f := range s.StripeFaults {
		r.stripe.AddFault(f)
	}
	for _, in := range s.Intents {
		if in.Kind == ops.KindRefund {
			r.stripe.AddPaymentIntent(in.Payment, in.PaymentCents, "usd", fake.OwnedBy(s.Tenants[in.Tenant].Name))
		}
	}
	r.stripeSrv = httptest.NewServer(r.counting(r.stripe.Handler()))
	r.adapter = stripe.New(stripe.Config{APIKey: "sk_test_chaos", BaseURL: r.stripeSrv.URL, AttemptTimeout: attemptTimeout,
		Retention: retention, ReadsPerSecond: 10000, TenantReadsPerSecond: 10000})
	r.llm = fake.NewLLM(fake.LLMOptions{Clock: r.clock.Now, Seed: int64(s.Seed), Words: 8})
	for _, f := range s.LLMFaults {
		r.llm.AddFault(f)
	}
	r.llmSrv = httptest.NewServer(r.counting(r.llm.Handler()))
	r.llmHTTP = http.DefaultTransport.(*http.Transport).Clone()
	up, err := openai.New(openai.Config{BaseURL: r.llmSrv.URL + "/v1", APIKey: "sk-chaos", AttemptTimeout: attemptTimeout,
		IdleTimeout: attemptTimeout, Store: openai.StoreOn, HTTPClient: &http.Client{Transport: r.llmHTTP}})
	if err != nil {
		r.close()
		return nil, err
	}
	r.upstream = up
	return r, nil
}

// close stops the fakes once nothing is left at them.
func (r *seedRun) close() {
	r.stripe.Close()
	r.llm.Close()
	r.stripeSrv.Close()
	r.llmSrv.Close()
	r.llmHTTP.CloseIdleConnections()
}

// quiesce waits until the fakes have answered every request, so nothing is still at a
// provider when the clock jumps a day or the invariants are read.
func (r *seedRun) quiesce() error {
	deadline := time.Now().Add(15 * time.Second)
	for r.inflight.Load() > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d requests still at the fakes after 15 s", r.inflight.Load())
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

func (r *seedRun) ledger(p *proc) *ops.Ledger {
	l := tune(ops.NewLedger(p, r.clock))
	registerKinds(l, r.s)
	return l
}

// registerKinds registers every kind with l, the jobs' policy as the schedule drew it.
func registerKinds(l *ops.Ledger, s *schedule) {
	l.Register(refund.Kind(), llm.Kind(), jobs.Kind(s.JobRetry))
}

func (r *seedRun) gateway(l *ops.Ledger, up llm.Upstream) (*llm.Gateway, error) {
	return llm.New(llm.Config{Ledger: l, Upstream: up, Prices: llm.DefaultPrices(), KeyTTL: retention, TenantModes: r.modes,
		Deadline: callDeadline, Sleep: sleep, Logger: discard, Stored: r.upstream})
}

// run executes the schedule's steps, then lets every job worker finish what is due.
func (r *seedRun) run(ctx context.Context) error {
	for i, st := range r.s.Steps {
		if err := r.step(ctx, i, st); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, st.Kind, err)
		}
	}
	r.bg.Wait()
	if r.s.hasKind(ops.KindLLMJob) {
		// A job parked on an operation a person closed is claimable at any time; the next
		// seed on this database must not find it, so the workers take it now.
		r.workers(ctx, len(r.s.Steps), step{Workers: 1}, 10)
	}
	return r.quiesce()
}

func (r *seedRun) step(ctx context.Context, i int, st step) error {
	switch st.Kind {
	case stepSend:
		var wg sync.WaitGroup
		for _, sd := range st.Sends {
			for c := range sd.Copies {
				crash := ""
				if c == 0 {
					crash = sd.Crash
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					r.send(ctx, sd, crash)
				}()
			}
		}
		if st.Background {
			r.bg.Add(1)
			go func() {
				defer r.bg.Done()
				wg.Wait()
			}()
			return nil
		}
		wg.Wait()
	case stepJoin:
		r.bg.Wait()
	case stepLease:
		r.clock.Advance(lease + time.Second)
	case stepRetention:
		r.bg.Wait()
		if err := r.quiesce(); err != nil {
			return err
		}
		r.clock.Advance(retention + time.Hour)
	case stepReaper:
		return r.reap(ctx, i)
	case stepPerson:
		return r.person(ctx, st)
	case stepWorker:
		r.workers(ctx, i, st, 4)
	}
	return nil
}

// send is one client request.
func (r *seedRun) send(ctx context.Context, sd send, crash string) {
	in := r.s.Intents[sd.Intent]
	t := r.tenants[in.Tenant]
	ref := fmt.Sprintf("%s-%d", in.Name, r.reqNo.Add(1))
	switch in.Kind {
	case ops.KindRefund:
		r.mu.Lock()
		known := r.refunded[in.Name]
		r.mu.Unlock()
		if known && sd.Variant != invalid {
			r.note("client of %s knows it was refunded and does not ask again", in.Name)
			return
		}
		p := newProc(r.db)
		var prov refund.Provider = r.adapter
		if crash != "" {
			prov = &crashingProvider{Provider: r.adapter, p: p, at: crash}
		}
		tool := &refund.Tool{Ledger: r.ledger(p), Store: p, Provider: prov, Deadline: callDeadline, Sleep: sleep}
		req := refund.Request{TenantID: t.ID, Tenant: t.Name, OrderID: in.Order, AmountCents: in.Cents, Currency: "usd",
			PaymentIntent: in.Payment, RequestRef: ref}
		switch sd.Variant {
		case otherParams:
			req.Reason = "duplicate"
		case invalid:
			req.AmountCents = 0
		}
		r.counted(t.ID, ops.KindRefund, ref)
		a, err := tool.Refund(ctx, req)
		r.mu.Lock()
		r.told[ref] = fmt.Sprintf("answer %q, error %v", a.Status, err)
		r.refunds = append(r.refunds, refundSeen{intent: in.Name, answer: a, err: err})
		if err == nil && (a.Status == refund.Refunded || a.Status == refund.Pending) {
			r.refunded[in.Name] = true
		}
		r.mu.Unlock()
	case ops.KindLLMCall:
		p := newProc(r.db)
		var up llm.Upstream = r.upstream
		if crash != "" {
			up = &crashingUpstream{Upstream: r.upstream, p: p, at: crash}
		}
		g, err := r.gateway(r.ledger(p), up)
		if err != nil {
			r.note("gateway: %v", err)
			return
		}
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "stream": in.Stream, "max_tokens": 16,
			"messages": []map[string]string{{"role": "user", "content": in.Prompt}}})
		switch sd.Variant {
		case otherParams:
			body = bytes.Replace(body, []byte("settled?"), []byte("settled again?"), 1)
		case invalid:
			body = []byte(`{"model":`)
		}
		var out sink
		r.counted(t.ID, ops.KindLLMCall, ref)
		err = g.Complete(ctx, llm.Request{Tenant: t, Key: in.Key, HasKey: true, ContentType: "application/json",
			Body: bytes.NewReader(body), RequestRef: ref}, &out)
		// A whole success is answered before its close is written; the step is over once
		// its process has written the close (or died trying), as a server's is.
		if derr := g.Drain(ctx); derr != nil {
			r.note("drain: %v", derr)
		}
		r.mu.Lock()
		r.told[ref] = fmt.Sprintf("began %t, operation %q, error %v (crash %q)", out.began, out.head.OperationID, err, crash)
		r.chats = append(r.chats, chatSeen{intent: in.Name, err: err, began: out.began, head: out.head, body: out.buf.String(),
			died: crash == crashAfterSend})
		r.mu.Unlock()
	case ops.KindLLMJob:
		svc := &jobs.Service{Ledger: r.ledger(newProc(r.db)), Store: jobstore.New(r.db), Catalog: jobs.DefaultCatalog(), Clock: r.clock}
		for _, key := range in.JobKeys {
			sub := jobs.Submission{TenantID: t.ID, IdempotencyKey: key, Document: jobs.Document{Text: in.Doc},
				Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast", RequestRef: ref}
			switch sd.Variant {
			case otherParams:
				sub.Document.Text += " It was changed."
			case invalid:
				sub.IdempotencyKey = ""
			}
			got, err := svc.Submit(ctx, sub)
			if ops.ErrorCode(err) == ops.EINVALID {
				// A refused submission records no job: it is recorded as its tenant's
				// client request (checkRequests).
				r.mu.Lock()
				r.requests[reqKey(t.ID, ops.KindLLMJob)] = append(r.requests[reqKey(t.ID, ops.KindLLMJob)], ref)
				r.told[ref] = fmt.Sprintf("refused: %v", err)
				r.mu.Unlock()
			}
			if err == nil {
				r.mu.Lock()
				if r.jobKeys[t.ID] == nil {
					r.jobKeys[t.ID] = map[string]bool{}
				}
				r.jobKeys[t.ID][got.Job.IdempotencyKey] = true
				r.mu.Unlock()
			}
		}
	}
}

func (r *seedRun) reap(ctx context.Context, i int) error {
	l := r.ledger(newProc(r.db))
	rp := &ops.Reaper{Ledger: l, Owner: fmt.Sprintf("reaper-%d-%d", r.s.Seed, i), Senders: map[ops.Kind]ops.Sender{ops.KindRefund: r.adapter},
		Sleep: sleep, Logger: discard}
	if _, err := rp.RunOnce(ctx); err != nil {
		r.note("reaper: %v", err)
	}
	return nil
}

// workers runs job workers side by side, each taking due jobs up to passes times; the first
// one's process dies at st.Crash.
func (r *seedRun) workers(ctx context.Context, i int, st step, passes int) {
	var wg sync.WaitGroup
	for w := range st.Workers {
		p := newProc(r.db)
		crash := ""
		if w == 0 {
			crash = st.Crash
		}
		worker := &jobs.Worker{Store: p, Ledger: tune(jobs.NewLedger(p, r.clock, lease, r.s.JobRetry)), Upstream: r.upstream,
			Prices: llm.DefaultPrices(), Catalog: jobs.DefaultCatalog(), Owner: fmt.Sprintf("worker-%d-%d-%d", r.s.Seed, i, w),
			Logger: discard, Sleep: sleep, Hooks: jobs.WorkerHooks{AtPoint: func(point string) {
				if point == crash {
					p.kill()
				}
			}}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range passes {
				n, err := worker.RunOnce(ctx)
				if err != nil && !p.dead.Load() {
					r.note("worker: %v", err)
				}
				if n == 0 || p.dead.Load() {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// queueRows lists the seed's rows in the queues a person works from, oldest first.
func (r *seedRun) queueRows(ctx context.Context) ([]*ops.Operation, error) {
	var rows []*ops.Operation
	for _, t := range r.tenants {
		for _, s := range []ops.Status{ops.StatusUnknown, ops.StatusExpired, ops.StatusInProgress} {
			page, err := deskstore.New(r.db).ListQueue(ctx, desk.QueueFilter{Status: s, TenantID: t.ID, Limit: 100}, r.clock.Now())
			if err != nil {
				return nil, err
			}
			rows = append(rows, page.Ops...)
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if !rows[i].CreatedAt.Equal(rows[j].CreatedAt) {
			return rows[i].CreatedAt.Before(rows[j].CreatedAt)
		}
		return rows[i].ID < rows[j].ID
	})
	return rows, nil
}

// recordOf is what a person reads in the provider's own dashboard for an operation: the
// refund carrying its id, or the first completion billed for it.
func (r *seedRun) recordOf(op *ops.Operation) string {
	if op.Kind == ops.KindRefund {
		for _, rf := range r.stripe.Refunds() {
			if rf.Metadata[stripe.MetadataKey] == op.ID && charged(rf.Status) {
				return rf.ID
			}
		}
		return ""
	}
	for _, g := range r.llm.Generations() {
		if strings.HasPrefix(g.ClientRequestID, op.ID+".") {
			return g.ID
		}
	}
	return ""
}

// person is someone on the dashboard acting on one row of the seed's queues.
func (r *seedRun) person(ctx context.Context, st step) error {
	rows, err := r.queueRows(ctx)
	if err != nil || len(rows) == 0 {
		return err
	}
	op := rows[st.Pick%len(rows)]
	p := newProc(r.db)
	l := r.ledger(p)
	d := &desk.Desk{Ledger: l, Refunds: &refund.Tool{Ledger: l, Store: p, Provider: r.adapter, Deadline: callDeadline, Sleep: sleep},
		Completions: &llm.Lookups{Ledger: l, Events: r.db, Store: r.upstream, Prices: llm.DefaultPrices()},
		Events:      r.db, Audit: deskstore.New(r.db)}
	const actor = "oncall@chaos.test"
	switch st.Action {
	case actLookup:
		out, err := d.Lookup(ctx, op.ID, actor)
		r.note("person: lookup of %s (%s): %s %v", op.ID, op.Kind, out.Outcome, err)
	case actCloseSucceeded:
		ref := r.recordOf(op)
		if ref == "" {
			r.note("person: no record of %s at the provider, left open", op.ID)
			return nil
		}
		_, err := d.CloseManually(ctx, desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, ProviderRef: ref,
			Note: "found it in the provider's dashboard", Actor: actor})
		r.note("person: close %s as succeeded with %s: %v", op.ID, ref, err)
	case actCloseFailed:
		_, err := d.CloseManually(ctx, desk.ManualClose{ID: op.ID, Version: op.Version, To: ops.StatusFailed,
			Note: "the customer says nothing arrived", Actor: actor})
		r.note("person: close %s as failed: %v", op.ID, err)
	case actCloseNotExecute:
		out, err := d.CloseNotExecuted(ctx, op.ID, op.Version, "past retention, nothing at Stripe", actor)
		r.note("person: close %s as not executed: %s %v", op.ID, out.Outcome, err)
	}
	return nil
}

// charged reports whether a refund at the fake Stripe holds money.
func charged(status string) bool { return status != "failed" && status != "canceled" }
