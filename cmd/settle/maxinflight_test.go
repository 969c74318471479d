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

	"github.com/settle-dev/settle/ops"
)

// SETTLE_MAX_IN_FLIGHT defaults to 1000, takes a whole number or off (0 and off: no cap),
// and anything else stops serve and demo with one line and exit status 2.
func TestMaxInFlightIsConfigured(t *testing.T) {
	t.Parallel()
	db := "postgres://u@127.0.0.1:1/x"
	for v, want := range map[string]int{"": 1000, "1000": 1000, "250": 250, "0": 0, "off": 0} {
		cfg, err := LoadConfig([]string{"serve"}, env(map[string]string{"DATABASE_URL": db, "SETTLE_MAX_IN_FLIGHT": v}), t.TempDir())
		if err != nil || cfg.Web.MaxInFlight != want {
			t.Errorf("SETTLE_MAX_IN_FLIGHT=%q: %d, %v; want %d", v, cfg.Web.MaxInFlight, err, want)
		}
	}
	for _, v := range []string{"lots", "-1", "1.5", "1e3", "on"} {
		for _, args := range [][]string{{"serve"}, {"demo"}} {
			code, stdout, stderr := run(t, args, map[string]string{"DATABASE_URL": db, "SETTLE_MAX_IN_FLIGHT": v}, "")
			want := `SETTLE_MAX_IN_FLIGHT="` + v + `" is not a whole number of requests`
			if code != 2 || stdout != "" || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("settle %v with SETTLE_MAX_IN_FLIGHT=%s: exit %d, stderr %q; want 2 and one line with %q", args, v, code, stderr, want)
			}
		}
	}
}

// serve hands SETTLE_MAX_IN_FLIGHT to its API: with a cap of 1, a refund whose body is still
// arriving holds the one place, and the next API request is shed at once with 503 and
// Retry-After: 1 (ops rule 8: refused before it names its tenant, nothing recorded); once
// the first client has gone, the API takes requests again.
func TestServeShedsBeyondSettleMaxInFlight(t *testing.T) {
	t.Parallel()
	p := serveWith(t, map[string]string{"SETTLE_MAX_IN_FLIGHT": "1"})
	_, token := shopToken(t, p)
	head := "POST /api/v1/refunds HTTP/1.1\r\nHost: settle\r\nAuthorization: Bearer " + token +
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"order_id\":\""
	hold := func() net.Conn {
		conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL(), "http://"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	conn := hold()
	defer func() { conn.Close() }()
	post := func() *http.Response { return postEmptyRefund(t, p) }
	// The held request reaches its handler a moment after its headers are sent. Until then a
	// probe may take the one place itself, and the held request arriving meanwhile is the one
	// shed: the server answers it, and it is sent again.
	var resp *http.Response
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp = post(); resp.StatusCode == http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		if answered(conn) {
			conn.Close()
			conn = hold()
		}
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("an API request beside one in flight at a cap of 1: %d, Retry-After %q; want 503 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	conn.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp = post(); resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
	}
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an API request without a token once the held client left: %d, want 401", resp.StatusCode)
	}
}

// answered reports whether the server has written to conn or closed it, without waiting.
func answered(conn net.Conn) bool {
	_ = conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	var b [1]byte
	n, err := conn.Read(b[:])
	var ne net.Error
	return n > 0 || !(errors.As(err, &ne) && ne.Timeout())
}

// shopToken creates the tenant shop on p's database and an API token of it.
func shopToken(t *testing.T, p *Program) (*ops.Tenant, string) {
	t.Helper()
	ctx := context.Background()
	tn, err := p.DB.EnsureTenant(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	token, err := p.DB.CreateToken(ctx, tn.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	return tn, token
}

// postEmptyRefund posts an empty refund without a token to p's API and returns the answer,
// its body closed.
func postEmptyRefund(t *testing.T, p *Program) *http.Response {
	t.Helper()
	resp, err := http.Post(p.URL()+"/api/v1/refunds", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
