package llm_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/openai"
)

// sends is a client's connection as the gateway writes a stream to it: a Write sends what
// was held and its own part at once, a Hold keeps its part back, a Flush sends what was held
// (llm.HoldingSink). got is each send, what reached the client at that moment.
type sends struct {
	mu      sync.Mutex
	pending bytes.Buffer
	got     []string
	// first is closed once the stream's first event has reached the client.
	first     chan struct{}
	firstOnce sync.Once
}

func (s *sends) Begin(llm.Head) error { return nil }

func (s *sends) Write(p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending.Write(p)
	s.send()
	return nil
}

func (s *sends) Hold(p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending.Write(p)
	return nil
}

func (s *sends) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.send()
	return nil
}

func (s *sends) send() {
	if s.pending.Len() == 0 {
		return
	}
	out := s.pending.String()
	s.pending.Reset()
	s.got = append(s.got, out)
	if strings.Contains(out, "id: 1-1\n") {
		s.firstOnce.Do(func() { close(s.first) })
	}
}

// chatChunk is one event of a streamed chat completion.
func chatChunk(delta, finish string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-burst","object":"chat.completion.chunk","created":1,"model":"fake-small","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, delta, finish)
}

// A provider that sends several events at once (here, after its first) has them relayed in
// fewer sends to the client than events, each event whole, with its id, in order: the
// gateway holds an event back while the provider's next one is already read. The first
// event, after which the provider waits, is not held: the provider sends nothing more until
// the client has it, so a held event would stall the stream until the provider gave up.
func TestStreamBurstIsSentTogetherAndNothingWaitsForTheProvider(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	out := &sends{first: make(chan struct{})}
	waited := make(chan bool, 1)
	words := []string{"one", "two", "three", "four", "five"}
	provider := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(rw)
		fmt.Fprintf(rw, "data: %s\n\n", chatChunk(`{"role":"assistant","content":""}`, "null"))
		_ = rc.Flush()
		select {
		case <-out.first:
			waited <- true
		case <-time.After(10 * time.Second):
			waited <- false
		}
		var burst strings.Builder
		for _, word := range words {
			fmt.Fprintf(&burst, "data: %s\n\n", chatChunk(`{"content":"`+word+` "}`, "null"))
		}
		fmt.Fprintf(&burst, "data: %s\n\n", chatChunk(`{}`, `"stop"`))
		fmt.Fprintf(&burst, "data: %s\n\n", `{"id":"chatcmpl-burst","object":"chat.completion.chunk","created":1,"model":"fake-small","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`)
		burst.WriteString("data: [DONE]\n\n")
		_, _ = rw.Write([]byte(burst.String()))
		_ = rc.Flush()
	}))
	t.Cleanup(provider.Close)
	up, err := openai.New(openai.Config{Name: "burst", BaseURL: provider.URL, APIKey: "sk-burst", Store: openai.StoreOff})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := llm.New(llm.Config{Ledger: w.world.GatewayLedger(w.clock, 0), Upstream: up, Prices: llm.DefaultPrices(), Refs: w.db, Streams: w.db})
	if err != nil {
		t.Fatal(err)
	}
	err = gw.Complete(context.Background(), llm.Request{Tenant: w.tenants["shop"], Route: "/v1/chat/completions", Key: "burst-1", HasKey: true,
		ContentType: "application/json", Body: strings.NewReader(chatBody("count to five", 0, true))}, out)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if derr := gw.Drain(ctx); err != nil || derr != nil {
		t.Fatalf("the call: %v, %v", err, derr)
	}
	if !<-waited {
		t.Fatalf("the first event was held while the provider waited for the client to have it; sends %q", out.got)
	}
	// What the client read, event by event: the first, the five words and the finish, each
	// under its id, then [DONE] (the usage chunk goes only to a client that asked for it).
	want := []string{"id: 1-1\ndata: " + chatChunk(`{"role":"assistant","content":""}`, "null") + "\n\n"}
	for i, word := range words {
		want = append(want, fmt.Sprintf("id: 1-%d\ndata: %s\n\n", i+2, chatChunk(`{"content":"`+word+` "}`, "null")))
	}
	want = append(want, fmt.Sprintf("id: 1-%d\ndata: %s\n\n", len(words)+2, chatChunk(`{}`, `"stop"`)), "data: [DONE]\n\n")
	if got := strings.Join(out.got, ""); got != strings.Join(want, "") || out.pending.Len() != 0 {
		t.Fatalf("the client read %q (%d bytes left unsent), want %q", got, out.pending.Len(), strings.Join(want, ""))
	}
	if len(out.got) == 0 || out.got[0] != want[0] {
		t.Fatalf("first send %q, want the first event alone", out.got)
	}
	// The burst's six events and [DONE] came in one read: they go out together (with the
	// usage chunk the client does not get between them), never in a send per event.
	if after := len(out.got) - 1; after >= len(want)-1 {
		t.Fatalf("the burst of %d events went out in %d sends: %q", len(want)-1, after, out.got[1:])
	}
}

// ending is a client's connection that can send a stream's last part with the end of the
// response (llm.EndingSink): what End writes is sent, with what was held, when the request
// returns, in one send.
type ending struct {
	sends
	// ended is what End wrote; after counts writes made after it.
	ended []string
	after int
}

func (e *ending) Write(p []byte) error { e.wrote(); return e.sends.Write(p) }
func (e *ending) Hold(p []byte) error  { e.wrote(); return e.sends.Hold(p) }
func (e *ending) Flush() error         { e.wrote(); return e.sends.Flush() }

func (e *ending) End(p []byte) error {
	e.wrote()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = append(e.ended, string(p))
	e.pending.Write(p)
	return nil
}

func (e *ending) wrote() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.ended) > 0 {
		e.after++
	}
}

// A stream's closing event ([DONE]) goes to a Sink that can send it with the end of the
// response through End, once and last, and with it the events held before it: the client's
// connection is not sent [DONE] alone and then the body's end alone. A stream relayed live,
// and the same stream replayed from its record, end so.
func TestAStreamsClosingEventGoesWithTheEndOfTheResponse(t *testing.T) {
	t.Parallel()
	w := newGatewayWorld(t, gatewaySetup{})
	for _, run := range []string{"live", "replayed"} {
		out := &ending{sends: sends{first: make(chan struct{})}}
		err := w.gw.Complete(context.Background(), llm.Request{Tenant: w.tenants["shop"], Route: "/v1/chat/completions", Key: "end-1", HasKey: true,
			ContentType: "application/json", Body: strings.NewReader(chatBody("say something", 0, true))}, out)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		derr := w.gw.Drain(ctx)
		cancel()
		if err != nil || derr != nil {
			t.Fatalf("%s: %v, %v", run, err, derr)
		}
		if len(out.ended) != 1 || out.ended[0] != "data: [DONE]\n\n" || out.after != 0 {
			t.Fatalf("%s: End wrote %q, with %d writes after it; want [DONE] once, last", run, out.ended, out.after)
		}
		if got := strings.Join(out.got, "") + out.pending.String(); !strings.HasSuffix(got, "\n\ndata: [DONE]\n\n") || !strings.HasPrefix(got, "id: 1-1\n") {
			t.Fatalf("%s: the client would read %q", run, got)
		}
	}
}
