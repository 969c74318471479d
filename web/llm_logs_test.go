package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/reqlog"
	"github.com/settle-dev/settle/web"
)

// lockedBuffer is a log destination shared by the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// count is how many logged lines have value at key.
func (b *lockedBuffer) count(t *testing.T, key, value string) int {
	t.Helper()
	n := 0
	for _, l := range b.lines(t) {
		if l[key] == value {
			n++
		}
	}
	return n
}

func (b *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// A stream the provider drops after its first chunk is logged twice: by the gateway as the
// stream ends, and by the edge as it answers. Each line names the request, the tenant, the
// operation, the provider's request and the key (by a hash prefix, never the key or the
// prompt); the client request row keeps the request id, and the operation's page shows it,
// so on-call goes from the line to the row and back.
func TestLLMLogLinesJoinTheLedger(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	logger := slog.New(reqlog.Handler(slog.NewJSONHandler(&logs, nil)))
	w := newLLMWorld(t, llmSetup{logger: logger})
	w.fake.AddFault(fake.LLMFault{Kind: fake.LLMFaultDropStream})
	const key, prompt = "secret-key-4711", "my account number is 12345"
	resp := w.post(t, "shop", key, chatBody(prompt, 0.2, true))
	_, _ = io.Copy(io.Discard, resp.Body)
	requestID := resp.Header.Get("X-Request-Id")
	op := w.op(t, key)
	gens := w.fake.Generations()
	if len(gens) == 0 {
		t.Fatal("the provider generated nothing")
	}

	lines := logs.lines(t)
	if len(lines) == 0 {
		t.Fatal("nothing was logged for a dropped stream")
	}
	want := map[string]string{
		reqlog.RequestID: requestID, reqlog.Tenant: "shop", reqlog.OperationID: op.ID,
		reqlog.ProviderRequestID: gens[len(gens)-1].RequestID, reqlog.KeyHash: reqlog.HashKey(key),
	}
	for _, l := range lines {
		for k, v := range want {
			if l[k] != v {
				t.Errorf("log line %q: %s = %v, want %q", l["msg"], k, l[k], v)
			}
		}
	}
	if raw := logs.buf.String(); strings.Contains(raw, key) || strings.Contains(raw, "12345") {
		t.Errorf("the logs carry the key or the prompt: %s", raw)
	}

	if n := w.count(t, `SELECT count(*) FROM client_requests WHERE operation_id = $1 AND request_id = $2`, op.ID, requestID); n != 1 {
		t.Fatalf("%d client requests of operation %s keep request id %s, want 1", n, op.ID, requestID)
	}
	// The dashboard, served by another process on the same database.
	dash := w.world.Server(w.clock)
	dash.DashboardDeps = web.DashboardDeps{Desk: &desk.Desk{Ledger: w.world.Ledger(w.clock), Events: w.db, Audit: deskstore.New(w.db)},
		Timelines: deskstore.New(w.db)}
	e := start(t, w.world, dash.Handler())
	e.user(t, "oncall@example.com", desk.RoleOncall)
	c := client(t)
	if lr := e.login(t, c, "oncall@example.com", password); lr.StatusCode != http.StatusSeeOther {
		t.Fatalf("login answered %d", lr.StatusCode)
	}
	if page, body := e.get(t, c, "/ops/"+op.ID); !strings.Contains(body, "request id "+requestID) {
		t.Errorf("the operation's page (%d) does not show request id %s:\n%s", page.StatusCode, requestID, body)
	}
}
