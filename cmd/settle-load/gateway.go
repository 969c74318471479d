package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/settle-dev/settle/ops/fake"
)

// The gateway benchmark (`settle-load gateway`, `make bench-gateway`) measures what Settle's
// LLM gateway adds to a call under load, beside what a bare reverse proxy adds, on each API
// it serves (chat completions, the Responses API, Anthropic's Messages API, embeddings).
// At each rate and on each API it offers the same open-loop traffic, for the same time,
// first to the fake provider directly (the fake LLM, or the fake Anthropic for messages),
// then through a plain httputil.ReverseProxy process, then through a `settle serve` process
// on a private, durable Postgres, so the three are measured in the same sitting under the
// same machine load. Half the requests stream, on the APIs that stream. A plain call is
// timed to the end of its answer, a stream to its first event, which the fake sends after
// its fixed time to first token. Every request carries its own Idempotency-Key.

// gatewayConfig is what one gateway benchmark does.
type gatewayConfig struct {
	rates      []float64     // requests per second, in the order they are offered
	apis       []*gatewayAPI // the routes offered each rate, in turn
	duration   time.Duration // how long each target is offered each rate
	rounds     int           // how many turns the duration is cut into at each rate
	warmup     time.Duration // traffic at the first rate sent to each target first, not measured
	pause      time.Duration // rest between two phases
	ttft       time.Duration // the fake's wait before its first chunk or its whole answer
	chunks     int           // the content chunks of a streamed answer (a token each)
	chunkDelay time.Duration // the fake's pause before each content chunk
	timeout    time.Duration // a request's limit, answer included
	settleBin  string
	dir        string
	// statements has the cluster count each statement (pg_stat_statements), to report
	// the statements each request cost; off by default, as counting costs Postgres a little.
	statements bool
}

func gatewayMain(args []string) int {
	cfg, err := parseGatewayFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "settle-load gateway:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runGateway(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "settle-load gateway:", err)
		return 2
	}
	return 0
}

func parseGatewayFlags(args []string) (gatewayConfig, error) {
	fs := flag.NewFlagSet("settle-load gateway", flag.ContinueOnError)
	var c gatewayConfig
	rates := fs.String("rates", envString("RATES", "100,300,500"), "requests per second offered, in turn (env RATES)")
	apis := fs.String("apis", envString("APIS", "chat,responses,messages,embeddings"), "the APIs offered each rate, in turn (env APIS)")
	fs.DurationVar(&c.duration, "duration", envDuration("DURATION", 60*time.Second), "how long each target is offered each rate (env DURATION)")
	fs.IntVar(&c.rounds, "rounds", 1, "cut each rate's duration into this many turns of direct, proxy, settle on each API, to spread a shared machine's drift over the three")
	fs.DurationVar(&c.warmup, "warmup", 3*time.Second, "unmeasured traffic at the first rate sent to each target before the run")
	fs.DurationVar(&c.pause, "pause", 2*time.Second, "rest between two phases")
	fs.DurationVar(&c.ttft, "ttft", 50*time.Millisecond, "the fakes' time to their first chunk (and to a whole unstreamed answer)")
	fs.IntVar(&c.chunks, "chunks", 20, "content chunks of a streamed answer, besides its opening and closing chunks")
	fs.DurationVar(&c.chunkDelay, "chunk-delay", 5*time.Millisecond, "the fakes' pause before each content chunk")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "a request's limit, its answer read to the end included")
	fs.StringVar(&c.settleBin, "settle", "bin/settle", "the settle binary to run")
	fs.StringVar(&c.dir, "dir", ".settle", "folder under which the run keeps its cluster and the servers' logs")
	fs.BoolVar(&c.statements, "statements", envString("STATEMENTS", "") != "", "count Postgres's statements (pg_stat_statements) and report them per request and the costliest of each Settle phase (env STATEMENTS=1)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	for _, s := range strings.Split(*rates, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || r <= 0 {
			return c, fmt.Errorf("-rates %q: want positive numbers separated by commas", *rates)
		}
		if slices.Contains(c.rates, r) {
			return c, fmt.Errorf("-rates %q names %g twice: -rounds repeats a rate", *rates, r)
		}
		c.rates = append(c.rates, r)
	}
	if c.apis, err = parseAPIs(*apis); err != nil {
		return c, err
	}
	if c.duration <= 0 || c.rounds <= 0 || c.chunks <= 0 || c.ttft < 0 || c.chunkDelay < 0 || c.timeout <= 0 {
		return c, fmt.Errorf("-duration, -rounds, -chunks and -timeout must be positive, -ttft and -chunk-delay not negative")
	}
	bin, err := filepath.Abs(c.settleBin)
	if err != nil {
		return c, err
	}
	c.settleBin = bin
	return c, nil
}

func envString(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// gatewayEnv is Settle's environment in the benchmark beside the database and the fakes:
// production's defaults, so its background work (reconciler, workers, leases) runs at its
// usual pace, and no Stripe key, so refunds are off.
var gatewayEnv = []string{"SETTLE_LLM_API_KEY=sk-gatewaybench", "SETTLE_ANTHROPIC_API_KEY=" + gatewayAnthropicKey}

// gatewayAnthropicKey is Settle's key at the fake Anthropic, and the benchmark's when it
// calls the fake Anthropic directly.
const gatewayAnthropicKey = "sk-ant-api03-gatewaybench"

// target is one of the three things measured.
type target struct {
	name string
	// base is where OpenAI's routes are sent and messages where Anthropic's are: the two
	// fakes for the direct target, the same server for the proxy and Settle.
	base, messages string
	token          string
	proc           *replica // the server process, for its CPU and RSS; nil for the fake, which runs in this one
	client         *http.Client
}

// url is where the target takes api's requests.
func (t *target) url(api *gatewayAPI) string {
	if api.name == "messages" {
		return t.messages + api.route
	}
	return t.base + api.route
}

// auth is the key the target takes on api: Settle's tenant token, or the fake's key.
func (t *target) auth(api *gatewayAPI) string {
	if t.proc == nil && api.name == "messages" {
		return gatewayAnthropicKey
	}
	return t.token
}

// runGateway makes one benchmark and prints its table to out.
func runGateway(ctx context.Context, cfg gatewayConfig, out io.Writer) error {
	before := loadAverage()
	w, targets, err := startGatewayWorld(ctx, cfg, out)
	if err != nil {
		return err
	}
	defer w.close()
	fsync := fdatasyncCost(w.cluster.Dir)
	rt50, rt99 := roundTrip(ctx, w.url)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	if cfg.warmup > 0 {
		for _, api := range cfg.apis {
			for _, t := range targets {
				t.drive(ctx, api, cfg.rates[0], cfg.warmup, run+"-warm", w)
				sleep(ctx, cfg.pause)
			}
		}
	}
	var phases []*phase
	for ri, rate := range cfg.rates {
		at := make([]*phase, len(cfg.apis)*len(targets))
		for round := range cfg.rounds {
			for ai, api := range cfg.apis {
				for i, t := range targets {
					if ctx.Err() != nil {
						return fmt.Errorf("interrupted")
					}
					p := t.drive(ctx, api, rate, cfg.duration/time.Duration(cfg.rounds), fmt.Sprintf("%s-%d-%d", run, ri, round), w)
					fmt.Fprintf(out, "  %4.0f/s %-10s %-7s %6d requests, %d failed, last answer %.1fs after the start\n",
						rate, api.name, t.name, p.sent, sum(p.errors), p.span.Seconds())
					at[ai*len(targets)+i] = at[ai*len(targets)+i].add(p)
					sleep(ctx, cfg.pause)
				}
			}
		}
		phases = append(phases, at...)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted")
	}
	printGateway(out, cfg, phases, machine{before, loadAverage(), fsync, rt50, rt99})
	fmt.Fprintf(out, "servers' logs: %s\n", w.runDir)
	return nil
}

// startGatewayWorld starts the durable cluster, the fake LLM and the fake Anthropic (in this
// process), Settle with one tenant and its API token, and the reverse proxy (this binary
// again), and returns the three targets: the fakes directly, the proxy, Settle.
func startGatewayWorld(ctx context.Context, cfg gatewayConfig, out io.Writer) (w *world, targets []*target, err error) {
	if w, err = newWorld(config{settleBin: cfg.settleBin, dir: cfg.dir, tenants: 1}, "gateway-"); err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	fmt.Fprintf(out, "gateway benchmark in %s: starting a durable Postgres, the fake LLM, the fake Anthropic, Settle and a reverse proxy\n", w.runDir)
	if cfg.statements {
		w.pgSettings = map[string]string{"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track_planning": "on"}
	}
	if err := w.startDatabase(ctx); err != nil {
		return nil, nil, err
	}
	w.stripe = fake.NewStripe(fake.StripeOptions{})
	w.llm = fake.NewLLM(fake.LLMOptions{Latency: cfg.ttft, ChunkDelay: cfg.chunkDelay, Words: cfg.chunks})
	w.anthropic = fake.NewAnthropic(fake.AnthropicOptions{Latency: cfg.ttft, ChunkDelay: cfg.chunkDelay, Words: cfg.chunks})
	anthropicBase, err := w.anthropic.Start("127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	if err := w.prepare(ctx, append(slices.Clip(gatewayEnv), "SETTLE_ANTHROPIC_BASE_URL="+anthropicBase)); err != nil {
		return nil, nil, err
	}
	if cfg.statements {
		if _, err := w.db.Pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; CREATE EXTENSION IF NOT EXISTS pg_walinspect"); err != nil {
			return nil, nil, fmt.Errorf("count statements: %w", err)
		}
	}
	settle, err := w.startReplica(ctx, "settle", freeAddr())
	if err != nil {
		return nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	addr := freeAddr()
	llmBase := strings.TrimSuffix(w.llmBase, "/v1")
	proxy, err := w.startServer(ctx, "proxy", addr, nil, self, "reverse-proxy", "-addr", addr, "-upstream", llmBase,
		"-anthropic", anthropicBase)
	if err != nil {
		return nil, nil, err
	}
	targets = []*target{
		{name: "direct", base: llmBase, messages: anthropicBase, token: "sk-gatewaybench"},
		{name: "proxy", base: proxy.url(), messages: proxy.url(), token: "sk-gatewaybench", proc: proxy},
		{name: "settle", base: settle.url(), messages: settle.url(), token: w.tokens[0], proc: settle},
	}
	for _, t := range targets {
		// Connections are kept and reused, one pool per target: a request in flight holds
		// one, so the pool must hold as many as are ever in flight at once.
		t.client = &http.Client{Timeout: cfg.timeout, Transport: &http.Transport{
			MaxIdleConns: 0, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 5 * time.Minute, DisableCompression: true}}
	}
	return w, targets, nil
}

// phase is one target offered one rate on one API: what each request got.
type phase struct {
	target  *target
	api     *gatewayAPI
	rate    float64
	sent    int
	errors  map[string]int
	plain   []time.Duration // whole answers, sorted
	stream  []time.Duration // first chunks, sorted
	late    []time.Duration // how late each request left against its schedule, sorted
	span    time.Duration   // from the first request's schedule to the last answer
	cpu     time.Duration   // the target process's user and system time over the span
	waited  time.Duration   // how long its threads waited for a CPU, ready to run, over the span
	pgCPU   time.Duration   // Postgres's, all its processes together
	ownCPU  time.Duration   // the benchmark's own process's: the load generator and the fakes
	walSync int64           // WAL flushes to disk over the span (pg_stat_wal.wal_sync)
	starved time.Duration   // how long, over the span, some task of the machine waited for a CPU
	peakRSS int64           // the target process's VmHWM at the end, kB
	stmts   *statements     // what Postgres ran over the span, with -statements
}

// add returns p with q's requests added (another turn of the same target and rate); p may be
// nil.
func (p *phase) add(q *phase) *phase {
	if p == nil {
		return q
	}
	p.sent += q.sent
	for k, v := range q.errors {
		p.errors[k] += v
	}
	p.plain = append(p.plain, q.plain...)
	p.stream = append(p.stream, q.stream...)
	p.late = append(p.late, q.late...)
	slices.Sort(p.plain)
	slices.Sort(p.stream)
	slices.Sort(p.late)
	p.span += q.span
	p.cpu += q.cpu
	p.waited += q.waited
	p.pgCPU += q.pgCPU
	p.ownCPU += q.ownCPU
	p.walSync += q.walSync
	p.starved += q.starved
	p.peakRSS = max(p.peakRSS, q.peakRSS)
	p.stmts = p.stmts.add(q.stmts)
	return p
}

// sample is one request's outcome.
type sample struct {
	stream  bool
	latency time.Duration
	late    time.Duration
	fail    string // why it failed; "" when it did not
}

// drive offers rate requests per second of api for d on a fixed schedule, request i leaving
// at i/rate whatever became of those before it (open loop), every other one streamed if the
// API streams, and returns once every answer is in. The cluster's processes' CPU time and
// WAL flushes are measured too.
func (t *target) drive(ctx context.Context, api *gatewayAPI, rate float64, d time.Duration, run string, w *world) *phase {
	n := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	samples := make([]sample, n)
	var cpu0, wait0 time.Duration
	if t.proc != nil {
		cpu0, wait0 = t.proc.cpu(), t.proc.runQueueWait()
	}
	counting := w.pgSettings != nil
	if counting {
		resetStatements(ctx, w)
	}
	pg0, wal0, starved0, own0 := clusterCPU(w.cluster.Dir), walSyncs(ctx, w), cpuPressure(), ownCPU()
	start := time.Now()
	var wg sync.WaitGroup
	sent := 0
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		if ctx.Err() != nil {
			break
		}
		key := fmt.Sprintf("gw-%s-%s-%s-%g-%d", run, api.name, t.name, rate, i)
		wg.Go(func() { samples[i] = t.call(ctx, api, at, api.streams() && i%2 == 1, key) })
		sent++
	}
	wg.Wait()
	p := &phase{target: t, api: api, rate: rate, sent: sent, errors: map[string]int{}, span: time.Since(start),
		pgCPU: clusterCPU(w.cluster.Dir) - pg0, walSync: walSyncs(ctx, w) - wal0, starved: cpuPressure() - starved0, ownCPU: ownCPU() - own0}
	if counting {
		p.stmts = readStatements(ctx, w)
	}
	if t.proc != nil {
		p.cpu, p.waited = t.proc.cpu()-cpu0, t.proc.runQueueWait()-wait0
		t.proc.sample()
		p.peakRSS = t.proc.peakKB.Load()
	}
	for _, s := range samples[:sent] {
		p.late = append(p.late, s.late)
		switch {
		case s.fail != "":
			p.errors[s.fail]++
		case s.stream:
			p.stream = append(p.stream, s.latency)
		default:
			p.plain = append(p.plain, s.latency)
		}
	}
	slices.Sort(p.plain)
	slices.Sort(p.stream)
	slices.Sort(p.late)
	return p
}

// call sends one request of api scheduled for at and reads its answer to the end.
func (t *target) call(ctx context.Context, api *gatewayAPI, at time.Time, stream bool, key string) sample {
	s := sample{stream: stream}
	body := api.bodies[0]
	if stream {
		body = api.bodies[1]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url(api), bytes.NewReader(body))
	if err != nil {
		s.fail = classTransport
		return s
	}
	for k, v := range api.header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+t.auth(api))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	start := time.Now()
	s.late = start.Sub(at)
	resp, err := t.client.Do(req)
	if err != nil {
		s.fail = classTransport
		return s
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode != http.StatusOK:
		_, _ = io.Copy(io.Discard, resp.Body)
		s.fail = "HTTP " + strconv.Itoa(resp.StatusCode)
	case stream:
		s.latency, s.fail = firstChunk(resp.Body, start, api.end)
	default:
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			s.fail = classTransport
		}
		s.latency = time.Since(start)
	}
	return s
}

// firstChunk reads a stream of server-sent events to its end and returns how long after
// start its first event arrived, and why the stream failed: an event end says is a failure,
// or no event end says closes the stream (chat completions' [DONE]).
func firstChunk(body io.Reader, start time.Time, end func(data []byte) (done, failed bool)) (time.Duration, string) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4<<10), 1<<20)
	var first time.Duration
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if first == 0 {
			first = time.Since(start)
		}
		switch done, failed := end(data); {
		case failed:
			return first, classStreamFail
		case done:
			return first, ""
		}
	}
	return first, classStreamCut
}
