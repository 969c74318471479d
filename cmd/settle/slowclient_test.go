package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// slowServer runs 'settle serve' on port 0 with short read timeouts and the environment
// vars (name, value, ...).
func slowServer(t *testing.T, header, whole time.Duration, vars ...string) *Program {
	t.Helper()
	m := map[string]string{"DATABASE_URL": pgtest.URL(pgtest.NewDatabase(t))}
	for i := 0; i+1 < len(vars); i += 2 {
		m[vars[i]] = vars[i+1]
	}
	cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0"}, env(m), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := NewProgram(cfg, testLogger(t))
	p.readHeaderTimeout, p.readTimeout = header, whole
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// trickle opens a connection, sends head, then one byte of tail every 100 ms without ever
// finishing it, and returns what the server answered and how long until it closed the
// connection. It gives up after 8 s.
func trickle(t *testing.T, p *Program, head, tail string) (answer string, after time.Duration, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := conn.Write([]byte{tail[i%len(tail)]}); err != nil {
				return
			}
		}
	}()
	conn.SetReadDeadline(start.Add(8 * time.Second))
	b, err := io.ReadAll(conn)
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	return string(b), time.Since(start), !timedOut
}

// A client that sends its headers a byte at a time is cut off when the header timeout
// ends, before any handler runs.
func TestSlowHeadersAreCutOff(t *testing.T) {
	t.Parallel()
	p := slowServer(t, 500*time.Millisecond, 2*time.Second)
	answer, after, closed := trickle(t, p, "GET /healthz HTTP/1.1\r\nHost: settle\r\n", "X-Slow: abcdefgh")
	if !closed || after > 2*time.Second {
		t.Fatalf("the connection of a client trickling its headers was open %s (closed %v), want it cut after 500 ms", after, closed)
	}
	if strings.HasPrefix(answer, "HTTP/1.1 5") {
		t.Fatalf("answered %q", answer)
	}
}

// A client whose body never finishes is cut off when the whole request's timeout ends:
// here without a token, so the handler answers 401 without reading the body and net/http
// reads what is left of it before it answers. The answer is a 4xx, never a 5xx.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	p := slowServer(t, 500*time.Millisecond, time.Second)
	head := "POST /api/v1/refunds HTTP/1.1\r\nHost: settle\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"order_id\":\""
	answer, after, closed := trickle(t, p, head, "4417")
	if !closed || after > 3*time.Second {
		t.Fatalf("the connection of a client trickling its body was open %s (closed %v), want it cut after 1 s", after, closed)
	}
	if !strings.HasPrefix(answer, "HTTP/1.1 4") {
		t.Fatalf("answered %q, want a 4xx", answer)
	}
}

// The whole request's timeout ends once the body is read: an answer that takes longer to
// come, or streams for longer, as LLM answers do, is not cut.
func TestReadTimeoutDoesNotCutLongAnswers(t *testing.T) {
	t.Parallel()
	f := fake.NewLLM(fake.LLMOptions{Seed: 1, ChunkDelay: 100 * time.Millisecond})
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p := slowServer(t, 200*time.Millisecond, 300*time.Millisecond, "SETTLE_LLM_BASE_URL", base, "SETTLE_LLM_API_KEY", "sk-test",
		"SETTLE_RECONCILE_INTERVAL", "off", "SETTLE_WORKERS", "0")
	_, token := shopToken(t, p)
	// 24 words, one chunk each, 100 ms apart: the stream lasts eight read timeouts.
	body := `{"model":"fake-small","stream":true,"messages":[{"role":"user","content":"take your time"}]}`
	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "long-answer-1")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Fatalf("after %s: %d %v\n%s", time.Since(start), resp.StatusCode, err, b)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the stream took %s; the test wants one longer than the read timeout", took)
	}
}
