package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/reqlog"
)

// Config configures a Gateway.
type Config struct {
	// Ledger records every client request and attempt; its Clock is the gateway's clock.
	Ledger *ops.Ledger
	// Upstream is the provider of OpenAI's APIs; Upstreams, by route, the provider of each
	// route served by a provider of its own (Anthropic's /v1/messages). A route without one
	// is not served. At least one of them is required.
	Upstream  Upstream
	Upstreams map[string]Upstream
	// Prices gives the cost of each generation; nil means every cost is unknown.
	Prices *PriceTable
	// KeyTTL is how long an Idempotency-Key stays bound to its operation; default 24 h. It
	// must be longer than any retry window of a client (SDK retries, a user reopening the
	// screen). An operation still open when it passes is expired and never sent again.
	KeyTTL time.Duration
	// Mode is the default policy; TenantModes overrides it by tenant name, and
	// TenantModes["tenant /route"] by tenant and route.
	Mode        Mode
	TenantModes map[string]Mode
	// KeyScope is whose requests share an Idempotency-Key (default ScopeTenant);
	// TenantKeyScopes overrides it by tenant name.
	KeyScope        KeyScope
	TenantKeyScopes map[string]KeyScope
	// Deadline bounds one client request's attempts and backoff; default 10 min.
	Deadline time.Duration
	// MaxWait caps `Prefer: wait=N`; default 60 s.
	MaxWait time.Duration
	// RetryAfter is the Retry-After of a 409 while the key is in flight; default 1 s.
	RetryAfter time.Duration
	// MaxBody is the largest request body read; default 4 MiB.
	MaxBody int64
	// PhaseDelay is how long a phase (sent_to_provider, first_token) lasts before it is
	// written; calls that end sooner skip the write. Default 1 s: a phase is for the people
	// watching a call that is taking long and no rule rests on it, while its write is a
	// third statement beside the open and the close. Negative writes at once.
	PhaseDelay time.Duration
	// Sleep waits between attempts; default ops.SleepContext.
	Sleep  ops.Sleeper
	Logger *slog.Logger
	// Stored is the provider's store of completions when Settle looks calls up there (nil:
	// no lookups); Reconciled says a background reconciler does so for unknown calls. Both
	// decide only what a client is told will happen to a call whose outcome is unknown.
	Stored     StoredCompletions
	Reconciled bool
	// Refs records the provider's id of an attempt's answer as soon as its stream names it
	// (the Responses API's response id, the Messages API's message id); nil records it only
	// with the answer. ops/pg's also reads them back, records provider charges and finds
	// whose a response id is (ResponseOwners), which background responses and GET
	// /v1/responses/{id} need.
	Refs AttemptRefs
	// Streams reads the events stored with a streamed answer, so that its replay sends them
	// again as they were; nil replays every stream rebuilt from its answer.
	Streams StoredStreams
	// Budgets caps each tenant's LLM spend per UTC day (budget.go); nil caps none.
	Budgets *Budgets
}

// Gateway is the LLM gateway. Build it with New; it is safe for concurrent use.
type Gateway struct {
	cfg     Config
	clock   ops.Clock
	flights *hub
	stats   counters
	// runs are the ledger runs of this gateway's requests still going, the closes written
	// after their client had its answer among them (Drain).
	runs pending
}

// New checks cfg, fills in defaults and returns a gateway.
func New(cfg Config) (*Gateway, error) {
	switch {
	case cfg.Ledger == nil || (cfg.Upstream == nil && len(cfg.Upstreams) == 0):
		return nil, ops.Errorf(ops.EINVALID, "The LLM gateway needs a ledger and an upstream.")
	case cfg.Mode != "" && !cfg.Mode.Valid():
		return nil, ops.Errorf(ops.EINVALID, "Unknown LLM policy %q: use interactive or batch.", cfg.Mode)
	}
	for k, m := range cfg.TenantModes {
		if !m.Valid() {
			return nil, ops.Errorf(ops.EINVALID, "Unknown LLM policy %q for %s: use interactive or batch.", m, k)
		}
	}
	if err := checkScopes(&cfg); err != nil {
		return nil, err
	}
	if cfg.Mode == "" {
		cfg.Mode = Interactive
	}
	if cfg.KeyTTL <= 0 {
		cfg.KeyTTL = 24 * time.Hour
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = 10 * time.Minute
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = time.Minute
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = time.Second
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 4 << 20
	}
	if cfg.PhaseDelay == 0 {
		cfg.PhaseDelay = time.Second
	}
	if cfg.Sleep == nil {
		cfg.Sleep = ops.SleepContext
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if min := cfg.Ledger.Limits.RetentionMargin + cfg.Deadline; cfg.KeyTTL <= min {
		return nil, ops.Errorf(ops.EINVALID, "The LLM key TTL (%s) must be longer than the retention margin plus the call deadline (%s).", cfg.KeyTTL, min)
	}
	g := &Gateway{cfg: cfg, clock: cfg.Ledger.Clock, flights: newHub()}
	return g, nil
}

// policy is the ledger policy of a mode: they differ only in whether an uncertain call may
// be resent. A provider of chat completions takes no idempotency key either way.
func (g *Gateway) policy(m Mode) ops.Policy {
	return ops.Policy{RetryUncertain: m != Batch, NoProviderKey: true}
}

// upstream returns the provider of a route, nil when none is configured for it.
func (g *Gateway) upstream(route string) Upstream {
	if up, ok := g.cfg.Upstreams[route]; ok {
		return up
	}
	if route == MessagesRoute {
		// Anthropic's API is served only by a provider configured for it, never by the
		// OpenAI-compatible one.
		return nil
	}
	return g.cfg.Upstream
}

// ModeFor returns the policy of a tenant's calls on a route.
func (g *Gateway) ModeFor(tenant string, route string) Mode {
	if m, ok := g.cfg.TenantModes[tenant+" "+route]; ok {
		return m
	}
	if m, ok := g.cfg.TenantModes[tenant]; ok {
		return m
	}
	return g.cfg.Mode
}

// stored is what an llm_call operation keeps of its request, so that any process can tell
// its policy and resend it.
type stored struct {
	Mode   Mode   `json:"policy"`
	Route  string `json:"route"`
	Stream bool   `json:"stream"`
	// Headers are the client's headers the API passes to the provider.
	Headers map[string]string `json:"headers,omitempty"`
	// OutputCap is the cap Settle set on a budgeted request that named none, which every
	// attempt sends (budget_cap.go); Body stays the client's, as its fingerprint is.
	OutputCap int64           `json:"output_cap,omitempty"`
	Body      json.RawMessage `json:"body"`
}

// storedRequest is s with body, which parseRequest validated, spliced in as it is: a
// second encoding would only check and compact the request's bytes again.
func storedRequest(s stored, body []byte) []byte {
	head, _ := json.Marshal(s) // {"policy":…,"body":null}
	head = bytes.TrimSuffix(head, []byte(`null}`))
	out := make([]byte, 0, len(head)+len(body)+1)
	return append(append(append(out, head...), body...), '}')
}

// exchange is one client request in flight through the gateway.
type exchange struct {
	g      *Gateway
	ctx    context.Context
	tenant *ops.Tenant
	api    api
	up     Upstream
	req    *request
	body   []byte
	wait   time.Duration
	ref    string
	mode   Mode
	owner  string
	start  time.Time
	crID   int64
	out    Sink
	began  bool
	gone   bool // the client stopped reading
	// held says a stream event was written and held back (hold); frame and framed are the
	// buffers the stream's events are framed in.
	held          bool
	frame, framed []byte
	// lastEvent is the client's Last-Event-ID: the id of the last event of a broken stream
	// it read, after which its retry resumes.
	lastEvent string
	// possibleDup: the next send follows an attempt whose outcome is uncertain.
	possibleDup bool
	dups        int
	// in is the request's intent, kept to admit it again after a wait.
	in ops.Intent
	// op is the operation admission found or opened; sent says this request sent an
	// attempt of it to the provider.
	op   *ops.Operation
	sent bool
	// answered says the client had its whole answer before the close (answerEarly), and
	// early is closed then; both belong to the goroutine of the ledger's run.
	answered bool
	early    chan struct{}
	// share is what the transport says of the tenant's places (Request.Busy, Following).
	share share
	// outputCap is the cap fitCheck set on a new call; onCap is Request.OutputCap.
	outputCap  int64
	onCap      func(int64)
	budgetHold *Hold // the new call's budget hold from its check until a run takes it (admit)
}

// Complete answers one request of a route (Request.Route: chat completions, embeddings,
// responses, messages): from the stored result when its key has
// one, by waiting for or joining the request in flight, or by calling the provider. Errors
// returned before the Sink began are for the transport to answer (their Reason says how);
// once it began, failures are written into the stream and Complete returns nil.
func (g *Gateway) Complete(ctx context.Context, r Request, out Sink) (err error) {
	g.stats.requests.Add(1)
	if r.Tenant == nil || r.Tenant.ID <= 0 {
		return ops.Errorf(ops.EUNAUTHORIZED, "A tenant is required.")
	}
	x := &exchange{g: g, ctx: ctx, tenant: r.Tenant, ref: r.RequestRef, out: out, start: g.clock.Now(),
		owner: ops.NewOwner("llm", ""), share: share{busy: r.Busy, following: r.Following}, onCap: r.OutputCap}
	defer func() { x.budgetHold.Unsent(); err = x.outage(err) }()
	if x.api, err = apiFor(r.Route); err != nil {
		return g.refuse(ctx, r, err)
	}
	route := x.api.route()
	if x.up = g.upstream(route); x.up == nil {
		return g.refuse(ctx, r, ops.Errorf(ops.ENOTFOUND, "No provider of %s is configured on this server.", route))
	}
	key, err := x.check(r)
	if err != nil {
		return g.refuse(ctx, r, err)
	}
	x.wait = ParsePrefer(r.Prefer, g.cfg.MaxWait)
	if isBackground(x.req) {
		x.up = &backgroundUpstream{x: x, up: x.up}
	}
	x.mode = g.ModeFor(r.Tenant.Name, route)
	check := x.admitCheck(ctx) // first: the output cap it may set is stored with the request
	request := storedRequest(stored{Mode: x.mode, Route: route, Stream: x.req.Stream, Headers: x.req.headers, OutputCap: x.outputCap}, x.body)
	ikey, err := g.admitKey(ctx, r.Tenant, x.req.User, key)
	if err != nil {
		return err
	}
	in := ops.Intent{TenantID: r.Tenant.ID, Kind: ops.KindLLMCall, Provider: x.up.Name(), IntentKey: ikey,
		Fingerprint: x.req.Fingerprint(r.Tenant.ID), ChatRef: r.ChatRef, CustomerRef: customerRef(x.req.User),
		Request: request, Retention: g.cfg.KeyTTL}
	pol := g.policy(x.mode)
	in.RequestRef, in.Owner, in.Start, in.ReplayFor, in.HoldFailed, in.Policy, in.Check = x.ref, x.owner, x.start, g.cfg.KeyTTL, g.cfg.KeyTTL, &pol, check
	x.in = in
	adm, err := x.admit(in)
	if adm.Verdict == ops.VerdictConflict {
		x.g.stats.conflicts.Add(1)
		return &ops.Error{Code: ops.EINVALID, Reason: ReasonKeyReused,
			Message: "This Idempotency-Key was first used with another request (" + x.api.differs() + "). Use a new key for a new request."}
	}
	if err != nil {
		return err
	}
	x.crID = adm.ClientRequestID
	return x.serve(adm)
}

// refuse records a tenant's request refused before admission, a route no provider serves
// here as much as a malformed body, and returns its answer (ops rule 8).
func (g *Gateway) refuse(ctx context.Context, r Request, refusal error) error {
	return g.Refuse(ctx, r.Tenant.ID, r.RequestRef, refusal)
}

// Refuse records a call of the tenant refused before the gateway read it (the transport
// refuses a tenant beyond its share of the requests in flight) as the gateway records its
// own refusals, and returns its answer: refusal, or the outage that kept it from being
// recorded (ops rule 8).
func (g *Gateway) Refuse(ctx context.Context, tenantID int64, requestRef string, refusal error) error {
	g.stats.rejected.Add(1)
	return g.cfg.Ledger.Refuse(context.WithoutCancel(ctx), tenantID, ops.KindLLMCall, ops.CleanRef(requestRef), refusal)
}

// check reads and validates the request and returns its intent key.
func (x *exchange) check(r Request) (string, error) {
	if mt, _, err := mime.ParseMediaType(r.ContentType); err != nil || mt != "application/json" {
		return "", &ops.Error{Code: ops.EINVALID, Reason: ReasonUnsupportedType, Message: "Send the body as application/json."}
	}
	if r.Body == nil {
		r.Body = bytes.NewReader(nil)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, x.g.cfg.MaxBody+1))
	if err != nil {
		return "", &ops.Error{Code: ops.EINVALID, Reason: ReasonMalformedJSON, Message: "The body could not be read.", Err: err}
	}
	if int64(len(body)) > x.g.cfg.MaxBody {
		return "", &ops.Error{Code: ops.EINVALID, Reason: ReasonBodyTooLarge, Message: fmt.Sprintf("The body is over %d bytes.", x.g.cfg.MaxBody)}
	}
	key, err := ParseKey(r.Key, r.HasKey, r.Tenant.RequireIdempotencyKey)
	if err != nil {
		return "", err
	}
	reqlog.Set(x.ctx, reqlog.KeyHash, reqlog.HashKey(key))
	if err := errors.Join(ops.CheckRef(refSourceName(r.RequestRefFrom), r.RequestRef, ops.MaxRefBytes), ops.CheckRef("Settle-Chat-Ref", r.ChatRef, ops.MaxRefBytes)); err != nil {
		return "", err
	}
	if x.req, err = parseRequest(x.api, body, r.Header); err != nil {
		return "", err
	}
	if err := x.checkProviderObjects(body); err != nil {
		return "", err
	}
	if r.Header != nil && x.req.Stream {
		x.lastEvent = strings.TrimSpace(r.Header("Last-Event-ID"))
	}
	x.body = body
	if key == "" {
		// The tenant lets calls go without a key: each request is its own intent.
		key = "settle-auto-" + ops.NewOperationID()
	}
	return key, nil
}

// serve answers a request as its admission decided.
func (x *exchange) serve(adm ops.Admission) error {
	g, op := x.g, adm.Op
	switch adm.Verdict {
	case ops.VerdictSend:
		if adm.Created {
			g.stats.fresh.Add(1)
		}
		x.possibleDup = adm.PossibleDuplicate
		return x.run(op, adm.Attempt)
	case ops.VerdictInFlight:
		return x.inFlight(op)
	case ops.VerdictChecking:
		return g.unknownError(x.ctx, op)
	}
	if op.Status == ops.StatusSucceeded {
		g.stats.replays.Add(1)
		return x.replay(op, "")
	}
	atts, err := g.cfg.Ledger.Attempts(x.ctx, op.ID)
	if err != nil {
		return err
	}
	if ops.Uncertain(atts) {
		// Closed as failed by a person: the provider may still have generated (and billed)
		// it, so the key answers with the failure until its TTL ends and nothing is sent.
		return &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonGenerationFailed,
			Message: fmt.Sprintf("Operation %s of this key was closed as failed by %s, but the provider may have generated it; nothing more is sent for this key until it expires at %s. Use a new key to ask again.",
				op.ID, op.ClosedBy, op.CreatedAt.Add(g.cfg.KeyTTL).UTC().Format(time.RFC3339))}
	}
	return &ops.Error{Code: ops.EUNAVAILABLE, Reason: ReasonGenerationFailed,
		Message: fmt.Sprintf("The first request with this key failed at the provider (operation %s); nothing was billed. Send it again to try once more.", op.ID)}
}

// closeWait bounds how long a repeat waits for the close of a call answered before it.
const closeWait = 5 * time.Second

// afterEarlyAnswer answers a repeat of a key whose first request, running in this process
// as f, had its whole answer and is writing its close: the repeat waits the moment that
// takes and is replayed, rather than told the key is in flight. handled is false when f
// answered nothing early, or its close did not end succeeded within closeWait.
func (x *exchange) afterEarlyAnswer(f *flight, op *ops.Operation) (handled bool, err error) {
	if f == nil || !f.answered.Load() {
		return false, nil
	}
	select {
	case <-f.done:
		if cur, err := x.g.cfg.Ledger.Get(x.ctx, op.ID); err == nil && cur.Status == ops.StatusSucceeded {
			x.g.stats.waited.Add(1)
			return true, x.replayed(cur, "")
		}
	case <-time.After(closeWait):
	case <-x.ctx.Done():
		return true, x.ctx.Err()
	}
	return false, nil
}

// inFlight answers a request whose key is being served by another request: 409 with
// Retry-After, or with Prefer: wait=N, the first request's result once it has one. A
// streaming request on a stream this process is running follows it live without waiting to
// be told (follow); one running in another replica gets the 409 like any other.
func (x *exchange) inFlight(op *ops.Operation) error {
	if handled, err := x.inFlightBackground(op); handled {
		return err
	}
	g := x.g
	// Admission recorded the request as answered in_progress (ops rule 8).
	busy := func() error {
		g.stats.inFlight.Add(1)
		return &ops.Error{Code: ops.ECONFLICT, Reason: ReasonKeyInUse, Err: &Problem{RetryAfter: g.cfg.RetryAfter},
			Message: fmt.Sprintf("A request with this Idempotency-Key is in flight (operation %s). Retry after a moment, or send Prefer: wait=N to wait for its result.", op.ID)}
	}
	f := g.flights.get(op.ID)
	if handled, err := x.afterEarlyAnswer(f, op); handled {
		return err
	}
	if x.wait <= 0 {
		if x.req.Stream && f != nil && f.stream {
			// A streaming retry of a stream running here, its client's broken one as a
			// rule: it follows the generation live (stream.go).
			return x.follow(f, nil, "", busy)
		}
		if f == nil {
			// The generation may have ended, its close written and its flight gone, since
			// admission read the operation: the repeat is replayed, not told it is in flight.
			if cur, err := g.cfg.Ledger.Get(x.ctx, op.ID); err == nil && cur.Status == ops.StatusSucceeded {
				return x.replayed(cur, "")
			}
		}
		// A generation running in another replica cannot be followed from here.
		return busy()
	}
	timer := time.NewTimer(x.wait)
	defer timer.Stop()
	applied := fmt.Sprintf("wait=%d", int(x.wait/time.Second))
	if f != nil {
		if x.req.Stream && f.stream {
			return x.follow(f, timer.C, applied, busy)
		}
		select {
		case <-f.done:
		case <-timer.C:
			return busy()
		case <-x.ctx.Done():
			return x.ctx.Err()
		}
	} else {
		// Another process holds it: watch the row.
		poll := 20 * time.Millisecond
		for op.Leased(g.clock.Now()) {
			select {
			case <-timer.C:
				return busy()
			case <-x.ctx.Done():
				return x.ctx.Err()
			case <-time.After(poll):
			}
			poll = min(poll*2, 500*time.Millisecond)
			cur, err := g.cfg.Ledger.Get(x.ctx, op.ID)
			if err != nil {
				return err
			}
			op = cur
		}
	}
	cur, err := g.cfg.Ledger.Get(x.ctx, op.ID)
	if err != nil {
		return err
	}
	g.stats.waited.Add(1)
	if cur.Status == ops.StatusSucceeded {
		return x.replayed(cur, applied)
	}
	x.wait = 0
	return x.readmit(cur)
}

// replayed answers a request that found op succeeded after admission, and records it so.
func (x *exchange) replayed(op *ops.Operation, applied string) error {
	if err := x.g.cfg.Ledger.Answer(context.WithoutCancel(x.ctx), x.crID, ops.AnswerReplayed); err != nil {
		return err
	}
	x.g.stats.replays.Add(1)
	return x.replay(op, applied)
}

// readmit decides again for a request that waited on another one's operation, which ended
// without a completion (or is still held).
func (x *exchange) readmit(op *ops.Operation) error {
	adm, err := x.g.cfg.Ledger.Readmit(context.WithoutCancel(x.ctx), x.in, ops.Admission{Op: op, ClientRequestID: x.crID})
	if err != nil {
		return err
	}
	return x.serve(adm)
}
