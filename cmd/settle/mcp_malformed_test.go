package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawAgent speaks newline-delimited JSON-RPC to 'settle mcp --stdio' byte for byte, so it
// can send what no SDK client would.
type rawAgent struct {
	in *io.PipeWriter
	// lines are the server's lines, read by one goroutine for the whole session: a reply
	// that timed out leaves its read pending, and a second reader of the same stream races it.
	lines <-chan string
	logs  *lockedBuffer
}

// lockedBuffer collects the server's log lines while the server writes them.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startRawAgent(t *testing.T) (*rawAgent, *stdioAgent, chan error) {
	t.Helper()
	db, url, token := shopDatabase(t, "agent")
	fk, base := shopStripe(t)
	cfg := Config{Command: "mcp", DatabaseURL: url,
		Stripe: StripeConfig{APIKey: "sk_test_stdio", APIBase: base, Timeout: time.Second, Deadline: 3 * time.Second}}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelWarn}))
	served := make(chan error, 1)
	go func() {
		served <- serveMCPStdio(context.Background(), cfg, token, inR, outW, logger)
		outW.Close()
	}()
	stop := make(chan struct{})
	t.Cleanup(func() {
		inW.Close()
		close(stop)
		go io.Copy(io.Discard, outR)
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Error("the server did not stop when the agent hung up")
		}
	})
	a := &rawAgent{in: inW, lines: readLines(outR, stop), logs: logs}
	a.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"test"}}}`)
	if reply := a.reply(t); !strings.Contains(reply, `"id":1,`) || !strings.Contains(reply, `"result"`) {
		t.Fatalf("initialize answered %s", reply)
	}
	a.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return a, &stdioAgent{db: db, url: url, token: token, fake: fk}, served
}

// send writes a line without waiting for the server to read it: a server that stopped
// reading shows as a missing reply, not as a test that hangs.
func (a *rawAgent) send(t *testing.T, line string) {
	t.Helper()
	go func() { _, _ = io.WriteString(a.in, line+"\n") }()
}

// readLines reads r's lines into the returned channel until r ends (its last line then
// says why, and the channel is closed) or stop is closed.
func readLines(r io.Reader, stop <-chan struct{}) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		out := bufio.NewReaderSize(r, 1<<16)
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				line = "EOF: " + err.Error()
			}
			select {
			case lines <- line:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return lines
}

// reply returns the server's next line, failing the test if the server ends or stalls.
func (a *rawAgent) reply(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-a.lines:
		if !ok {
			return "EOF: the server's output ended"
		}
		return strings.TrimRight(line, "\n")
	case <-time.After(10 * time.Second):
		t.Fatal("no reply within 10 s")
		return ""
	}
}

// TestMCPStdioSurvivesAMalformedMessage: a local agent that sends one malformed line (not
// JSON, an id that is an object or a number no integer can hold, a line longer than the
// server reads) gets a JSON-RPC error for it, and its session goes on: the next tool call
// is answered. The bad lines refund nothing; those that read as a tool call are recorded as
// refused (TestMCPStdioDroppedToolCallsAreRecorded).
func TestMCPStdioSurvivesAMalformedMessage(t *testing.T) {
	t.Parallel()
	a, world, served := startRawAgent(t)
	refund := `"method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"4417","amount_cents":3800,"currency":"usd","payment_intent":"pi_4417"}}}`
	long := `{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"refund_status","arguments":{"order_id":"` +
		strings.Repeat("x", 16<<20+1024) + `"}}}`
	for i, c := range []struct {
		name, line, code, id string
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":7,"method":`, "-32700", "null"},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},` + refund, "-32600", "null"},
		{"id 1e400", `{"jsonrpc":"2.0","id":1e400,` + refund, "-32600", "null"},
		{"over-long line", long, "-32600", "null"},
		// Each message is within the SDK's nesting limit of 1000, the batch around it is not:
		// the SDK refuses it only once the line is read.
		{"batch too deep", `[{"jsonrpc":"2.0","id":51,"method":"ping","params":{"a":` +
			strings.Repeat("[", 998) + strings.Repeat("]", 998) + `}}]`, "-32600", "null"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a.send(t, c.line)
			reply := a.reply(t)
			var msg struct {
				ID    json.RawMessage `json:"id"`
				Error *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(reply), &msg); err != nil || msg.Error == nil ||
				fmt.Sprint(msg.Error.Code) != c.code || string(msg.ID) != c.id || len(reply) > 300 {
				t.Fatalf("the %s line was answered %.300q, want a JSON-RPC error %s with id %s", c.name, reply, c.code, c.id)
			}
			id := 100 + i
			a.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"refund_status","arguments":{"operation_id":"op_unknown"}}}`, id))
			if reply := a.reply(t); !strings.HasPrefix(reply, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":`, id)) {
				t.Fatalf("after the %s line, refund_status was answered %.300q, want its result", c.name, reply)
			}
		})
	}
	select {
	case err := <-served:
		served <- err // for the cleanup
		t.Fatalf("the server ended with %v", err)
	default:
	}
	if n := len(world.fake.Refunds()); n != 0 {
		t.Errorf("%d refunds at the fake for malformed lines, want 0", n)
	}
	if ops := world.count(t, `SELECT count(*) FROM operations`); ops != 0 {
		t.Errorf("%d operations for malformed lines, want 0", ops)
	}
	logs := a.logs.String()
	if n := strings.Count(logs, "malformed"); n != 5 || strings.Contains(logs, strings.Repeat("x", 200)) {
		t.Errorf("logs %.2000q: want one warning per malformed line, none echoing the long line", logs)
	}
}
