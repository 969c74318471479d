package web_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/llm"
	upstream "github.com/settle-dev/settle/ops/openai"
)

// A client that sends a streaming request and then never reads cannot hold the generation:
// once the connection's buffers are full the gateway's next write times out, the provider's
// stream is read to its end and stored, the lease is released and the handler returns.
//
// Both ends of the connection get small kernel buffers, so a stream of about 400 KB fills
// them many times over; the client sees no end of stream, which shows that a write did fail.
// A stream sized to outgrow the default buffers (7 MB) took a minute of a loaded machine.
func TestLLMClientThatStopsReadingDoesNotHoldTheGeneration(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	s.StreamWriteTimeout = 300 * time.Millisecond
	w := &llmWorld{world: tw, db: tw.DB, clock: ops.NewManualClock(time.Now()), tokens: map[string]string{}}
	w.fake, w.base = tw.LLM(fake.LLMOptions{Seed: 1})
	up := tw.Upstream(w.base, upstream.Config{Name: "fake-llm", APIKey: "sk-settle-upstream"})
	gw, err := llm.New(llm.Config{Ledger: ops.NewLedger(tw.DB, w.clock), Upstream: up, Prices: llm.DefaultPrices()})
	if err != nil {
		t.Fatal(err)
	}
	s.LLM = gw
	h := s.Handler()
	returned := make(chan struct{}, 1)
	base := serveSmallSendBuffers(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(rw, r)
		returned <- struct{}{}
	}))
	token := tw.Token(tw.Tenant("shop"), "test")

	// 2048 tokens, one SSE chunk of about 200 bytes each: far more than the small buffers
	// between the two ends hold.
	const tokens = 2048
	body := fmt.Sprintf(`{"model":"fake-small","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"write a lot"}]}`, tokens)
	u, _ := url.Parse(base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A small receive buffer fills sooner; the client still never reads a byte of it.
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(conn)
	fmt.Fprintf(bw, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Idempotency-Key: never-read-1\r\nContent-Length: %d\r\n\r\n%s", u.Host, token, len(body), body)
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}

	// What is asserted is that the call ends while the client never reads, not how fast: the
	// deadline only bounds a hang, far above the second or so the call takes on a busy machine.
	op := waitOp(t, w, "never-read-1", ops.StatusSucceeded, time.Minute)
	if op.LeaseUntil != nil {
		t.Errorf("succeeded operation still leased to %q until %v", op.LeaseOwner, op.LeaseUntil)
	}
	gens := w.generations(t, 1)
	if gens[0].CompletionTokens != tokens || !strings.Contains(string(op.Result), gens[0].Content) {
		t.Errorf("stored %d bytes for a generation of %d tokens", len(op.Result), gens[0].CompletionTokens)
	}
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler of the client that stopped reading has not returned")
	}
	// Had the whole stream fitted in the buffers, no write would have failed and the test
	// would show nothing: what reached the client must stop before the stream's end.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, _ := io.ReadAll(conn)
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) || bytes.Contains(got, []byte("[DONE]")) {
		t.Errorf("the client that never read was sent %d bytes, the whole stream or none of it: %.200q", len(got), got)
	}
}

// serveSmallSendBuffers serves h on loopback, giving each accepted connection a small kernel
// send buffer, so a client that stops reading blocks the server's writes after a few KB.
func serveSmallSendBuffers(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Listener = smallSendBuffers{Listener: ts.Listener, t: t}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}

// smallSendBuffers is a listener whose TCP connections have a 4 KB send buffer.
type smallSendBuffers struct {
	net.Listener
	t *testing.T
}

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetWriteBuffer(4096); err != nil {
			// An error here would stop the server: the test is told instead.
			l.t.Errorf("set the send buffer of an accepted connection: %v", err)
		}
	}
	return c, nil
}

// waitOp polls until the key's operation reaches status, for at most d.
func waitOp(t *testing.T, w *llmWorld, key string, status ops.Status, d time.Duration) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(d)
	for {
		var id string
		if err := w.db.Pool.QueryRow(ctx, `SELECT id::text FROM operations WHERE intent_key = $1`, key).Scan(&id); err == nil {
			op, err := w.db.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if op.Status == status {
				return op
			}
			if time.Now().After(deadline) {
				t.Fatalf("operation %s is %s (phase %s) after %s, want %s", op.ID, op.Status, op.Phase, d, status)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("no operation of key %s after %s: %v", key, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
