package llm_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/anthropic"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/localpg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/web"
)

func TestMain(m *testing.M) { testworld.Main(m) }

// BenchmarkGatewayOverhead measures what the gateway adds to a call of the fake provider,
// in the same run: each iteration calls the fake directly and through the gateway (the
// whole HTTP route on real Postgres, with a new Idempotency-Key), non-streaming and
// streaming, alternating so both see the same machine. It reports the added p50 and p99
// latency of non-streaming calls and the added p50 and p99 time to first token of
// streaming ones, in microseconds, and the ratios; then the bytes allocated per call.
//
// prompt=short and prompt=8KB are chat completions with a one-line prompt and an 8 KB one
// (a chat with some history), since the gateway reads, fingerprints and stores every
// request. api=responses, api=messages and api=embeddings make the same measure of the
// other routes with a one-line input: OpenAI's Responses API and Anthropic's Messages API
// (at the fake Anthropic) plain and streamed, embeddings plain only, as they do not stream.
//
// The database is a private cluster of the benchmark's own, durable (fsync and synchronous
// commit on, as in production), so each of the gateway's two commits waits for its WAL
// flush. Beside the latencies it reports what one flush costs on this machine, measured in
// the same run by PostgreSQL's pg_test_fsync in the cluster's folder (fdatasync, the
// server's wal_sync_method on Linux, of one 8 kB write), and what the gateway adds beyond
// two of them. SETTLE_BENCH_DURABLE=0 runs on the tests' cluster instead, whose commits skip
// the flush, as the benchmark did before: bench/compare.sh uses it to compare with older
// code. Run it with a fixed count, e.g.
//
//	go test ./ops/llm -run '^$' -bench GatewayOverhead -benchtime 2000x
func BenchmarkGatewayOverhead(b *testing.B) {
	b.Run("prompt=short", func(b *testing.B) { gatewayOverhead(b, chatBench("summarise the ticket")) })
	b.Run("prompt=8KB", func(b *testing.B) {
		gatewayOverhead(b, chatBench("summarise the ticket"+strings.Repeat(" and the long history of this chat", 250)))
	})
	b.Run("api=responses", func(b *testing.B) {
		gatewayOverhead(b, benchAPI{route: "/v1/responses", generated: fake.APIResponses, stream: true,
			body:  `{"model":"fake-small","input":"summarise the ticket","temperature":0.2,"max_output_tokens":16`,
			token: func(line string) bool { return strings.Contains(line, `response.output_text.delta`) }})
	})
	b.Run("api=messages", func(b *testing.B) {
		gatewayOverhead(b, benchAPI{route: llm.MessagesRoute, stream: true, header: http.Header{"Anthropic-Version": {"2023-06-01"}},
			body:  `{"model":"claude-haiku-4-5","max_tokens":16,"temperature":0.2,"messages":[{"role":"user","content":"summarise the ticket"}]`,
			token: func(line string) bool { return strings.Contains(line, `"text_delta"`) }})
	})
	b.Run("api=embeddings", func(b *testing.B) {
		gatewayOverhead(b, benchAPI{route: llm.EmbeddingsRoute, generated: fake.APIEmbeddings,
			body: `{"model":"text-embedding-3-small","input":"summarise the ticket"`})
	})
}

// benchAPI is one route the benchmark calls, at its fake directly and through the gateway.
type benchAPI struct {
	// route is the gateway's route; the fake serves the same path.
	route string
	// generated is the fake OpenAI's name of the API, whose billed generations are counted;
	// "" for the Messages API, which the fake Anthropic serves.
	generated fake.LLMAPI
	// body is the request without its closing brace, to which a stream's field is added.
	body string
	// stream says whether the route streams too, token whether a line of its stream
	// carries generated text: the first such line is its time to first token.
	stream bool
	token  func(line string) bool
	// header is sent on both paths besides the key and the content type.
	header http.Header
}

// chatBench is a chat completion of prompt.
func chatBench(prompt string) benchAPI {
	return benchAPI{route: "/v1/chat/completions", generated: fake.APIChatCompletions, stream: true,
		body: `{"model":"fake-small","messages":[{"role":"user","content":"` + prompt + `"}],"temperature":0.2,"max_tokens":16`,
		token: func(line string) bool {
			return strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`)
		}}
}

func gatewayOverhead(b *testing.B, api benchAPI) {
	// The garbage collector's target as settle runs (cmd/settle: gcPercent), unless GOGC
	// chooses another; the client and the fake share it, so both paths see the same.
	if os.Getenv("GOGC") == "" {
		prev := debug.SetGCPercent(400)
		b.Cleanup(func() { debug.SetGCPercent(prev) })
	}
	w, dataDir := benchWorld(b)
	db := w.DB
	f, base := w.LLM(fake.LLMOptions{})
	up := w.Upstream(base, openai.Config{APIKey: "sk-bench"})
	// The gateway's ledger has a pool of its own, opened as settle serve opens it (prepared
	// statements on a direct connection) and traced, so that each call's time in its
	// statements (bind, execution, commit and the wire, as the gateway waits for them) can
	// be told from the gateway's own work.
	var stmts stmtTime
	ldb, err := pg.Open(context.Background(), w.DatabaseURL, pg.WithTracer(&stmts), pg.PreparedWhenDirect())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ldb.Close)
	// As serve wires it, the provider's id of an answer is recorded on its attempt as soon as
	// a stream names it (the Responses and Messages APIs), on the same pool.
	cfg := llm.Config{Ledger: ops.NewLedger(ldb, ops.SystemClock{}), Upstream: up, Prices: llm.DefaultPrices(), Refs: ldb}
	direct := base + strings.TrimPrefix(api.route, "/v1")
	generations := func() int { return len(f.GenerationsOf(api.generated)) }
	if api.route == llm.MessagesRoute {
		a := fake.NewAnthropic(fake.AnthropicOptions{})
		abase, err := a.Start("127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = a.Close() })
		aup, err := anthropic.New(anthropic.Config{BaseURL: abase, APIKey: "sk-bench"})
		if err != nil {
			b.Fatal(err)
		}
		cfg.Upstreams = map[string]llm.Upstream{llm.MessagesRoute: aup}
		direct = abase + api.route
		generations = func() int { return len(a.Generations()) }
	}
	gw, err := llm.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	s := w.Server(ops.SystemClock{})
	// The token cache as serve wires it.
	s.Accounts = &web.TokenCache{Accounts: accountstore.New(db), TTL: 5 * time.Second, Clock: ops.SystemClock{}}
	s.LLM = gw
	gateway := w.Serve(s.Handler())
	token := w.Token(w.Tenant("bench"), "bench")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	client := &http.Client{Transport: tr}

	calls := 0 // every call made, each one generation at the fake
	call := func(url, auth, key string, stream bool) (total, firstToken time.Duration) {
		calls++
		b := api.body + "}"
		if stream {
			b = api.body + `,"stream":true}`
		}
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(b))
		for k, v := range api.header {
			req.Header[k] = v
		}
		req.Header.Set("Authorization", "Bearer "+auth)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(resp.Body)
			panic(fmt.Sprintf("%s answered %d: %s", url, resp.StatusCode, msg))
		}
		if !stream {
			_, _ = io.Copy(io.Discard, resp.Body)
			return time.Since(start), 0
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if firstToken == 0 && api.token(sc.Text()) {
				firstToken = time.Since(start)
			}
		}
		if firstToken == 0 {
			panic(fmt.Sprintf("%s streamed no token", url))
		}
		return time.Since(start), firstToken
	}
	via := gateway + api.route
	// Warm up: connections, the pool, prepared statements and their plans (Postgres plans the
	// first five runs of each on every connection), caches. The first hundred or so calls
	// through a fresh process are slower and would otherwise fill the p99.
	const warm = 400
	for i := range warm {
		call(direct, "sk-bench", "", api.stream && i%2 == 0)
		call(via, token, fmt.Sprintf("warm-%d", i), api.stream && i%2 == 0)
	}
	var flush flushes
	if dataDir != "" {
		flush.start(b, dataDir, db)
	}
	var dLat, gLat, dTTFT, gTTFT, inStmts, trips []time.Duration
	cpuBefore := processCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, _ := call(direct, "sk-bench", "", false)
		before := stmts.total.Load()
		g, _ := call(via, token, fmt.Sprintf("k-%d", i), false)
		inStmts = append(inStmts, time.Duration(stmts.total.Load()-before))
		t0 := time.Now()
		if _, err := ldb.Pool.Exec(context.Background(), "SELECT 1"); err != nil {
			b.Fatal(err)
		}
		trips = append(trips, time.Since(t0))
		dLat, gLat = append(dLat, d), append(gLat, g)
		if api.stream {
			_, dt := call(direct, "sk-bench", "", true)
			_, gt := call(via, token, fmt.Sprintf("s-%d", i), true)
			dTTFT, gTTFT = append(dTTFT, dt), append(gTTFT, gt)
		}
	}
	b.StopTimer()
	// The CPU the whole process spent per iteration: the client and the fake do the same
	// work on either side of a change to the gateway, so a change in it is the gateway's.
	b.ReportMetric(float64(processCPU(b)-cpuBefore)/float64(time.Microsecond)/float64(b.N), "process_cpu_us/op")
	if dataDir != "" {
		gatewayCalls := b.N
		if api.stream {
			gatewayCalls *= 2
		}
		flush.stop(b, dataDir, db, gatewayCalls)
	}
	// Memory, apart from the timed calls: bytes allocated per non-streaming call, by the
	// whole process (client, fake and, for the second, the gateway), in the same run.
	allocated := func() uint64 {
		m := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
		metrics.Read(m)
		return m[0].Value.Uint64()
	}
	perCall := func(url, auth, prefix string) float64 {
		const n = 500
		before := allocated()
		for i := range n {
			key := ""
			if prefix != "" {
				key = fmt.Sprintf("%s-%d", prefix, i)
			}
			call(url, auth, key, false)
		}
		return float64(allocated()-before) / n
	}
	dAlloc, gAlloc := perCall(direct, "sk-bench", ""), perCall(via, token, "mem")
	b.ReportMetric(dAlloc, "direct_alloc_B/call")
	b.ReportMetric(gAlloc, "gateway_alloc_B/call")
	b.ReportMetric(gAlloc/dAlloc, "alloc_ratio")
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	p := func(xs []time.Duration, q float64) time.Duration {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[min(int(q*float64(len(s))), len(s)-1)]
	}
	b.ReportMetric(us(p(dLat, 0.5)), "direct_p50_us")
	b.ReportMetric(us(p(gLat, 0.5)), "gateway_p50_us")
	b.ReportMetric(us(p(gLat, 0.5)-p(dLat, 0.5)), "added_p50_us")
	b.ReportMetric(us(p(gLat, 0.99)-p(dLat, 0.99)), "added_p99_us")
	b.ReportMetric(float64(p(gLat, 0.99))/float64(p(dLat, 0.99)), "p99_ratio")
	if api.stream {
		b.ReportMetric(us(p(gTTFT, 0.5)-p(dTTFT, 0.5)), "added_ttft_p50_us")
		b.ReportMetric(us(p(gTTFT, 0.99)-p(dTTFT, 0.99)), "added_ttft_p99_us")
		b.ReportMetric(float64(p(gTTFT, 0.5))/float64(p(dTTFT, 0.5)), "ttft_p50_ratio")
	}
	// The added latency split in two: the ledger's statements as the gateway waits for them,
	// and the rest (HTTP, parsing, fingerprint, the proxying), each call's statement time
	// taken from its own latency before the quantile.
	own := make([]time.Duration, len(gLat))
	for i := range gLat {
		own[i] = gLat[i] - inStmts[i]
	}
	b.ReportMetric(us(p(inStmts, 0.5)), "ledger_stmts_p50_us")
	b.ReportMetric(us(p(inStmts, 0.99)), "ledger_stmts_p99_us")
	// The floor under any statement: a SELECT 1 on the same pool, between the calls.
	b.ReportMetric(us(p(trips, 0.5)), "select1_p50_us")
	b.ReportMetric(us(p(trips, 0.99)), "select1_p99_us")
	b.ReportMetric(us(p(own, 0.5)-p(dLat, 0.5)), "added_without_stmts_p50_us")
	b.ReportMetric(us(p(own, 0.99)-p(dLat, 0.99)), "added_without_stmts_p99_us")
	if dataDir != "" {
		// What the gateway adds beyond its two durable commits in sequence (the operation
		// before the send, the result after), each costing about one fdatasync.
		two := 2 * flush.fdatasync()
		b.ReportMetric(us(flush.fdatasync()), "fdatasync_8kB_us")
		b.ReportMetric(us(p(gLat, 0.5)-p(dLat, 0.5)-two), "added_p50_beyond_2_fdatasync_us")
		b.ReportMetric(us(p(gLat, 0.99)-p(dLat, 0.99)-two), "added_p99_beyond_2_fdatasync_us")
	}
	// Every call was a new generation: none was answered from the store instead.
	if n := generations(); n != calls {
		b.Fatalf("the provider billed %d generations, want %d", n, calls)
	}
}

// processCPU is the CPU time this process has spent, user and system, in all its threads.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stmtTime sums the time of every statement of one pool, from the moment pgx sends it to
// the moment its answer has been read.
type stmtTime struct{ total atomic.Int64 }

type stmtStart struct{}

func (s *stmtTime) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, stmtStart{}, time.Now())
}

func (s *stmtTime) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	s.add(ctx)
}

func (s *stmtTime) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, stmtStart{}, time.Now())
}

func (s *stmtTime) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (s *stmtTime) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	s.add(ctx)
}

func (s *stmtTime) add(ctx context.Context) {
	if t, ok := ctx.Value(stmtStart{}).(time.Time); ok {
		s.total.Add(int64(time.Since(t)))
	}
}

// benchWorld returns the benchmark's world and the data folder of its durable cluster, or
// the tests' world and "" when SETTLE_BENCH_DURABLE=0.
func benchWorld(b *testing.B) (*testworld.World, string) {
	b.Helper()
	if os.Getenv("SETTLE_BENCH_DURABLE") == "0" {
		return testworld.New(b), ""
	}
	c := durableCluster(b)
	ctx := context.Background()
	name := fmt.Sprintf("gateway_%d", durableDBs.Add(1))
	admin, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if a, err := pgx.Connect(ctx, c.URL("postgres")); err == nil {
			_, _ = a.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			a.Close(ctx)
		}
	})
	db, err := pg.Open(ctx, c.URL(name))
	if err != nil {
		b.Fatal(err)
	}
	err = db.Migrate(ctx)
	if err == nil {
		_, err = db.Pool.Exec(ctx, "CREATE EXTENSION pg_stat_statements")
	}
	db.Close()
	if err != nil {
		b.Fatal(err)
	}
	return testworld.On(b, c.URL(name)), c.Dir
}

var (
	durableMu  sync.Mutex
	durable    *localpg.Cluster
	durableDBs atomic.Int64
)

// durableCluster starts the binary's durable cluster on first use, under .settle/ as the
// bench module's; testworld.Main stops and removes it after the benchmarks.
func durableCluster(b *testing.B) *localpg.Cluster {
	b.Helper()
	durableMu.Lock()
	defer durableMu.Unlock()
	if durable != nil {
		return durable
	}
	root := filepath.Join(pgtest.ProjectDir(), ".settle")
	if err := os.MkdirAll(root, 0o755); err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp(root, "bench-llm-")
	if err != nil {
		b.Fatal(err)
	}
	c, err := localpg.Start(context.Background(), localpg.Options{Dir: dir, Durable: true,
		Settings: map[string]string{"shared_preload_libraries": "pg_stat_statements"}})
	if err != nil {
		os.RemoveAll(dir)
		b.Fatalf("start a durable postgres: %v", err)
	}
	durable = c
	pgtest.AtExit(func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
		os.RemoveAll(c.Dir) // the folder the server used (elsewhere when root cannot share dir)
		os.RemoveAll(dir)
	})
	return c
}

// flushes measures the cost of a WAL flush around the timed calls, and counts the flushes.
type flushes struct {
	costs []time.Duration
	syncs int64
}

func (f *flushes) start(b *testing.B, dir string, db *pg.DB) {
	f.costs = append(f.costs, fdatasyncCost(b, dir))
	f.syncs = walSyncs(b, db)
	if _, err := db.Pool.Exec(context.Background(), "SELECT pg_stat_statements_reset()"); err != nil {
		b.Fatal(err)
	}
}

// stop measures the flush again and reports the server's WAL flushes per gateway call.
func (f *flushes) stop(b *testing.B, dir string, db *pg.DB, calls int) {
	f.costs = append(f.costs, fdatasyncCost(b, dir))
	b.ReportMetric(float64(walSyncs(b, db)-f.syncs)/float64(calls), "wal_syncs/gateway_call")
	// What the server itself spent on the gateway's statements (pg_stat_statements: executor
	// time, without the wire, the bind or the commit) and the WAL records they wrote: every
	// statement run once per gateway call (the benchmark's own reads run fewer times).
	var execMs, records float64
	err := db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(total_exec_time), 0), coalesce(sum(wal_records), 0)
		FROM pg_stat_statements WHERE calls >= $1 AND query NOT LIKE 'SELECT%'`, calls/2).Scan(&execMs, &records)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(execMs*1000/float64(calls), "server_exec_us/gateway_call")
	b.ReportMetric(records/float64(calls), "wal_records/gateway_call")
}

// fdatasync is the mean of the measurements before and after the timed calls.
func (f *flushes) fdatasync() time.Duration {
	var sum time.Duration
	for _, c := range f.costs {
		sum += c
	}
	return sum / time.Duration(len(f.costs))
}

// walSyncs returns the cluster's count of WAL flushes (pg_stat_wal.wal_sync). Sessions send
// their statistics at most once a second, so it waits for the idle ones to have sent theirs.
func walSyncs(b *testing.B, db *pg.DB) int64 {
	b.Helper()
	time.Sleep(1500 * time.Millisecond)
	var n int64
	if err := db.Pool.QueryRow(context.Background(), "SELECT wal_sync FROM pg_stat_wal").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// fdatasyncCost runs PostgreSQL's pg_test_fsync -s 2 on a file in dir (the cluster's data
// folder, so the same disk as its WAL) and returns its figure for fdatasync after one 8 kB
// write: what one durable commit waits for. The tool is stopped once that line is out; the
// rest of its tests would take another half minute.
func fdatasyncCost(b *testing.B, dir string) time.Duration {
	b.Helper()
	bin, err := localpg.FindBin()
	if err != nil {
		b.Fatal(err)
	}
	// The server's own folder: initdb on PATH may be a link to it.
	if initdb, err := filepath.EvalSymlinks(filepath.Join(bin, "initdb")); err == nil {
		bin = filepath.Dir(initdb)
	}
	file := filepath.Join(dir, "pg_test_fsync.tmp")
	defer os.Remove(file)
	cmd := exec.Command(filepath.Join(bin, "pg_test_fsync"), "-s", "2", "-f", file)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("pg_test_fsync: %v", err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // it removes its file on SIGTERM
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
	}()
	// "Compare file sync methods using one 8kB write:", then among its lines
	// "fdatasync   1001.624 ops/sec   998 usecs/op": the time is taken from ops/sec, the
	// more precise of the two.
	sc := bufio.NewScanner(out)
	var seen []string
	section := false
	for sc.Scan() {
		line := sc.Text()
		seen = append(seen, line)
		if strings.Contains(line, "using one 8kB write") {
			section = true
			continue
		}
		f := strings.Fields(line)
		if section && len(f) == 5 && f[0] == "fdatasync" && f[2] == "ops/sec" {
			perSec, err := strconv.ParseFloat(f[1], 64)
			if err != nil || perSec <= 0 {
				break
			}
			return time.Duration(float64(time.Second) / perSec)
		}
	}
	b.Fatalf("pg_test_fsync gave no fdatasync figure for one 8kB write:\n%s", strings.Join(seen, "\n"))
	return 0
}
