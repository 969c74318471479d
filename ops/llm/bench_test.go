package llm_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/testworld"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/web"
)

func TestMain(m *testing.M) { testworld.Main(m) }

// BenchmarkGatewayOverhead measures what the gateway adds to a call of the fake provider,
// in the same run: each iteration calls the fake directly and through the gateway (the
// whole HTTP route on real Postgres, with a new Idempotency-Key), non-streaming and
// streaming, alternating so both see the same machine. It reports the added p50 and p99
// latency of non-streaming calls and the added p50 and p99 time to first token of
// streaming ones, in microseconds, and the ratios; then the bytes allocated per call. It
// runs with a one-line prompt, and with an 8 KB one (a chat with some history), since
// the gateway reads, fingerprints and stores every request. Run it with a fixed count, e.g.
//
//	go test ./ops/llm -run '^$' -bench GatewayOverhead -benchtime 2000x
func BenchmarkGatewayOverhead(b *testing.B) {
	b.Run("prompt=short", func(b *testing.B) { gatewayOverhead(b, "summarise the ticket") })
	b.Run("prompt=8KB", func(b *testing.B) {
		gatewayOverhead(b, "summarise the ticket"+strings.Repeat(" and the long history of this chat", 250))
	})
}

func gatewayOverhead(b *testing.B, prompt string) {
	// The garbage collector's target as settle runs (cmd/settle: gcPercent), unless GOGC
	// chooses another; the client and the fake share it, so both paths see the same.
	if os.Getenv("GOGC") == "" {
		prev := debug.SetGCPercent(400)
		b.Cleanup(func() { debug.SetGCPercent(prev) })
	}
	w := testworld.New(b)
	db := w.DB
	f, base := w.LLM(fake.LLMOptions{})
	up := w.Upstream(base, openai.Config{APIKey: "sk-bench"})
	gw, err := llm.New(llm.Config{Ledger: ops.NewLedger(db, ops.SystemClock{}), Upstream: up, Prices: llm.DefaultPrices()})
	if err != nil {
		b.Fatal(err)
	}
	s := w.Server(ops.SystemClock{})
	// The token cache as serve wires it.
	s.Accounts = &web.TokenCache{Accounts: db, TTL: 5 * time.Second, Clock: ops.SystemClock{}}
	s.LLM = gw
	gateway := w.Serve(s.Handler())
	token := w.Token(w.Tenant("bench"), "bench")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	client := &http.Client{Transport: tr}

	body := `{"model":"fake-small","messages":[{"role":"user","content":"` + prompt + `"}],"temperature":0.2,"max_tokens":16`
	call := func(url, auth, key string, stream bool) (total, firstToken time.Duration) {
		b := body + "}"
		if stream {
			b = body + `,"stream":true}`
		}
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(b))
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
			line := sc.Text()
			if firstToken == 0 && strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
				firstToken = time.Since(start)
			}
		}
		return time.Since(start), firstToken
	}
	direct := base + "/chat/completions"
	via := gateway + "/v1/chat/completions"
	// Warm up: connections, the pool, prepared statements and their plans (Postgres plans the
	// first five runs of each on every connection), caches. The first hundred or so calls
	// through a fresh process are slower and would otherwise fill the p99.
	const warm = 400
	for i := range warm {
		call(direct, "sk-bench", "", i%2 == 0)
		call(via, token, fmt.Sprintf("warm-%d", i), i%2 == 0)
	}
	var dLat, gLat, dTTFT, gTTFT []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, _ := call(direct, "sk-bench", "", false)
		g, _ := call(via, token, fmt.Sprintf("k-%d", i), false)
		_, dt := call(direct, "sk-bench", "", true)
		_, gt := call(via, token, fmt.Sprintf("s-%d", i), true)
		dLat, gLat, dTTFT, gTTFT = append(dLat, d), append(gLat, g), append(dTTFT, dt), append(gTTFT, gt)
	}
	b.StopTimer()
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
	b.ReportMetric(us(p(gTTFT, 0.5)-p(dTTFT, 0.5)), "added_ttft_p50_us")
	b.ReportMetric(us(p(gTTFT, 0.99)-p(dTTFT, 0.99)), "added_ttft_p99_us")
	b.ReportMetric(float64(p(gTTFT, 0.5))/float64(p(dTTFT, 0.5)), "ttft_p50_ratio")
	if n := len(f.Generations()); n != 4*b.N+2*warm+1000 {
		b.Fatalf("the provider billed %d generations, want %d", n, 4*b.N+2*warm+1000)
	}
}
