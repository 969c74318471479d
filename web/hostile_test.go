package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/pg"
)

// hostileValues are reference and header values a careless or malicious client sends. Each
// must be refused with a 4xx problem naming the field, never a 5xx, and change nothing but
// the recorded refusal. Extend the list (or the fields below) to attack more.
var hostileValues = []struct{ name, v string }{
	{"NUL", "ref\x00after"},
	{"8KB", strings.Repeat("x", 8<<10)},
	{"10KB", strings.Repeat("y", 10<<10)},
	{"invalid UTF-8", "ref\xff\xfe"},
	{"cut multi-byte", "caf\xc3"},
	{"escape", "\x1b[31mred"},
	{"DEL", "del\x7f"},
	{"bell", "ding\x07"},
}

// hostileText are values that are fine as chat text but never in a stored string: a NUL and
// bytes that are not UTF-8.
var hostileText = hostileValues[:1:1]

func init() {
	hostileText = append(hostileText, hostileValues[3], hostileValues[4])
}

// jsonString writes v as a JSON string: escaped where it is UTF-8, raw bytes where it is
// not, as a broken client would send them.
func jsonString(v string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteString(`\` + string(c))
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// rawPost sends a request over a plain connection, so header values no HTTP client would
// send (a NUL) reach the server as an attacker would send them.
func rawPost(t *testing.T, base, path string, headers [][2]string, body string) (int, string, string) {
	t.Helper()
	u, _ := url.Parse(base)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n", path, u.Host, len(body))
	for _, h := range headers {
		fmt.Fprintf(&req, "%s: %s\r\n", h[0], h[1])
	}
	req.WriteString("\r\n" + body)
	if _, err := io.WriteString(conn, req.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

type hostileCase struct {
	name    string
	field   string // what the refusal must name
	path    string
	headers [][2]string
	body    string
}

// runHostile sends every case and checks: 4xx problem+json naming the field, no operation,
// no attempt, and every recorded client request a refusal.
func runHostile(t *testing.T, db *pg.DB, base string, cases []hostileCase) {
	t.Helper()
	for _, c := range cases {
		code, ctype, body := rawPost(t, base, c.path, c.headers, c.body)
		if code >= 500 || code < 400 {
			t.Errorf("%s: %d %s", c.name, code, trim(body))
			continue
		}
		var p struct {
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal([]byte(body), &p)
		// Go's own server refuses a header with a NUL before any handler runs, with a plain
		// 400: that is a refusal too, and nothing was recorded or changed.
		byServer := code == http.StatusBadRequest && strings.HasPrefix(body, "400 Bad Request")
		if !byServer && (ctype != "application/problem+json" || !strings.Contains(p.Detail, c.field)) {
			t.Errorf("%s: %d %s %s: want a problem naming %s", c.name, code, ctype, trim(body), c.field)
		}
	}
	var ops, atts, accepted int
	ctx := context.Background()
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM operations), (SELECT count(*) FROM attempts),
	(SELECT count(*) FROM client_requests WHERE answer IS DISTINCT FROM 'rejected')`).Scan(&ops, &atts, &accepted); err != nil {
		t.Fatal(err)
	}
	if ops != 0 || atts != 0 || accepted != 0 {
		t.Fatalf("hostile input changed rows: %d operations, %d attempts, %d client requests not refused", ops, atts, accepted)
	}
}

func trim(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

func TestHostileInputRefunds(t *testing.T) {
	t.Parallel()
	e := newRefundEnv(t)
	auth := [2]string{"Authorization", "Bearer " + e.token}
	fields := map[string]string{"order_id": `"4417"`, "amount_cents": `3800`, "currency": `"usd"`, "payment_intent": `"pi_4417"`,
		"reason": `"requested_by_customer"`, "request_ref": `"toolu_01"`}
	body := func(field, v string) string {
		var parts []string
		for k, d := range fields {
			if k == field {
				d = jsonString(v)
			}
			parts = append(parts, fmt.Sprintf("%q:%s", k, d))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	var cases []hostileCase
	for _, h := range hostileValues {
		for _, f := range []string{"order_id", "request_ref", "payment_intent", "reason", "currency"} {
			cases = append(cases, hostileCase{name: f + " " + h.name, field: f, path: "/api/v1/refunds",
				headers: [][2]string{auth}, body: body(f, h.v)})
		}
		r := body("", "")
		r = strings.Replace(r, `"request_ref":"toolu_01"`, `"request_ref":""`, 1)
		cases = append(cases, hostileCase{name: "X-Request-Ref " + h.name, field: "X-Request-Ref", path: "/api/v1/refunds",
			headers: [][2]string{auth, {"X-Request-Ref", h.v}}, body: r})
	}
	runHostile(t, e.db, e.url, cases)
}

func TestHostileInputChatCompletions(t *testing.T) {
	t.Parallel()
	w := newLLMWorld(t, llmSetup{})
	auth := [2]string{"Authorization", "Bearer " + w.tokens["shop"]}
	chat := func(content, user, model string) string {
		return `{"model":` + model + `,"messages":[{"role":"user","content":` + content + `}],"user":` + user + `}`
	}
	ok := chat(`"hello"`, `"u-1"`, `"fake-small"`)
	var cases []hostileCase
	for i, h := range hostileValues {
		key := [2]string{"Idempotency-Key", fmt.Sprintf("hostile-%d", i)}
		for _, hdr := range []string{"Settle-Chat-Ref", "X-Request-Ref", "X-Client-Request-Id", "Idempotency-Key"} {
			hs := [][2]string{auth, key, {hdr, h.v}}
			if hdr == "Idempotency-Key" {
				hs = [][2]string{auth, {hdr, h.v}}
			}
			cases = append(cases, hostileCase{name: hdr + " " + h.name, field: hdr, path: "/v1/chat/completions", headers: hs, body: ok})
		}
		cases = append(cases,
			hostileCase{name: "user " + h.name, field: "user", path: "/v1/chat/completions", headers: [][2]string{auth, key},
				body: chat(`"hello"`, jsonString(h.v), `"fake-small"`)},
			hostileCase{name: "model " + h.name, field: "model", path: "/v1/chat/completions", headers: [][2]string{auth, key},
				body: chat(`"hello"`, `"u-1"`, jsonString(h.v))})
	}
	for i, h := range hostileText {
		cases = append(cases, hostileCase{name: "message " + h.name, field: "messages", path: "/v1/chat/completions",
			headers: [][2]string{auth, {"Idempotency-Key", fmt.Sprintf("hostile-text-%d", i)}}, body: chat(jsonString(h.v), `"u-1"`, `"fake-small"`)})
	}
	runHostile(t, w.db, w.url, cases)
}

func TestHostileInputJobs(t *testing.T) {
	t.Parallel()
	e := newJobsEnv(t)
	auth := [2]string{"Authorization", "Bearer " + e.token}
	job := func(text, ref, pipeline, requestRef string) string {
		doc := `{"text":` + text + `}`
		if ref != "" {
			doc = `{"ref":` + ref + `,"hash":"` + strings.Repeat("a", 64) + `"}`
		}
		return `{"document":` + doc + `,"pipeline":` + pipeline + `,"prompt_version":"v1","model_profile":"fast","request_ref":` + requestRef + `}`
	}
	var cases []hostileCase
	for i, h := range hostileValues {
		key := [2]string{"Idempotency-Key", fmt.Sprintf("hostile-%d", i)}
		cases = append(cases,
			hostileCase{name: "Idempotency-Key " + h.name, field: "Idempotency-Key", path: "/api/v1/jobs",
				headers: [][2]string{auth, {"Idempotency-Key", h.v}}, body: job(`"a document"`, "", `"summarise"`, `"r"`)},
			hostileCase{name: "X-Request-Ref " + h.name, field: "X-Request-Ref", path: "/api/v1/jobs",
				headers: [][2]string{auth, key, {"X-Request-Ref", h.v}}, body: job(`"a document"`, "", `"summarise"`, `""`)},
			hostileCase{name: "request_ref " + h.name, field: "request_ref", path: "/api/v1/jobs",
				headers: [][2]string{auth, key}, body: job(`"a document"`, "", `"summarise"`, jsonString(h.v))},
			hostileCase{name: "pipeline " + h.name, field: "pipeline", path: "/api/v1/jobs",
				headers: [][2]string{auth, key}, body: job(`"a document"`, "", jsonString(h.v), `"r"`)},
			hostileCase{name: "document ref " + h.name, field: "ref", path: "/api/v1/jobs",
				headers: [][2]string{auth, key}, body: job("", jsonString(h.v), `"summarise"`, `"r"`)})
	}
	for i, h := range hostileText {
		cases = append(cases, hostileCase{name: "document text " + h.name, field: "text", path: "/api/v1/jobs",
			headers: [][2]string{auth, {"Idempotency-Key", fmt.Sprintf("hostile-text-%d", i)}}, body: job(jsonString(h.v), "", `"summarise"`, `"r"`)})
	}
	runHostile(t, e.db, e.url, cases)
}
