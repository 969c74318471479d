package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// SETTLE_MAX_IN_FLIGHT_PER_TENANT defaults to half of SETTLE_MAX_IN_FLIGHT, takes a whole
// number up to it or off (0, off and the whole: no share, which the server reads as none),
// and anything else, a share over the whole included, stops serve and demo with one line
// and exit status 2 (ops rule 8: the share is what keeps one tenant's requests from having
// every other tenant's shed unrecorded).
func TestMaxInFlightPerTenantIsConfigured(t *testing.T) {
	t.Parallel()
	db := "postgres://u@127.0.0.1:1/x"
	for _, c := range []struct {
		max, share string
		want       int
	}{
		{"", "", 500}, {"250", "", 125}, {"1", "", 0}, {"off", "", 0}, {"1000", "100", 100},
		{"1000", "0", 0}, {"1000", "off", 0}, {"1000", "1000", 1000}, {"off", "20", 20},
	} {
		vars := map[string]string{"DATABASE_URL": db, "SETTLE_MAX_IN_FLIGHT": c.max, "SETTLE_MAX_IN_FLIGHT_PER_TENANT": c.share}
		cfg, err := LoadConfig([]string{"serve"}, env(vars), t.TempDir())
		if err != nil || cfg.Web.MaxInFlightPerTenant != c.want {
			t.Errorf("SETTLE_MAX_IN_FLIGHT=%q, SETTLE_MAX_IN_FLIGHT_PER_TENANT=%q: %d, %v; want %d", c.max, c.share, cfg.Web.MaxInFlightPerTenant, err, c.want)
		}
	}
	for v, want := range map[string]string{"lots": "is not a whole number of requests", "-1": "is not a whole number of requests",
		"1.5": "is not a whole number of requests", "1001": "is more than SETTLE_MAX_IN_FLIGHT=1000"} {
		// Taken, the value would start a server that never ends: ask the configuration first.
		if _, err := LoadConfig([]string{"serve"}, env(map[string]string{"DATABASE_URL": db, "SETTLE_MAX_IN_FLIGHT_PER_TENANT": v}), t.TempDir()); err == nil {
			t.Errorf("SETTLE_MAX_IN_FLIGHT_PER_TENANT=%q was taken", v)
			continue
		}
		for _, args := range [][]string{{"serve"}, {"demo"}} {
			code, stdout, stderr := run(t, args, map[string]string{"DATABASE_URL": db, "SETTLE_MAX_IN_FLIGHT_PER_TENANT": v}, "")
			if code != 2 || stdout != "" || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("settle %v with SETTLE_MAX_IN_FLIGHT_PER_TENANT=%s: exit %d, stderr %q; want 2 and one line with %q", args, v, code, stderr, want)
			}
		}
	}
}

// serve hands SETTLE_MAX_IN_FLIGHT_PER_TENANT to its API: with a share of 1, a refund of
// shop whose body is still arriving holds shop's one place, and shop's next refund is
// refused at once with 429 tenant_busy and Retry-After: 1, recorded as shop's rejected
// client request (ops rule 8), while another tenant's request is still read and answered.
func TestServeRefusesATenantBeyondSettleMaxInFlightPerTenant(t *testing.T) {
	t.Parallel()
	p := serveWith(t, map[string]string{"SETTLE_MAX_IN_FLIGHT_PER_TENANT": "1", "STRIPE_API_KEY": "sk_test_share",
		"STRIPE_API_BASE": fakeStripeWith(t, "pi_share"), "SETTLE_RECONCILE_INTERVAL": "off"})
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
	// The held request takes shop's place a moment after its headers are sent. A probe holds
	// the one place while it is answered, and the held request arriving meanwhile is the one
	// refused: the server answers it, and it is sent again. The probes leave the place free
	// most of the time, so that the held request finds it free.
	var resp *http.Response
	var ref string
	for i, deadline := 0, time.Now().Add(15*time.Second); ; i++ {
		time.Sleep(250 * time.Millisecond)
		ref = fmt.Sprintf("probe-%d", i)
		if resp = postRefundAs(t, p, token, ref); resp.StatusCode == http.StatusTooManyRequests || time.Now().After(deadline) {
			break
		}
		if answered(conn) {
			conn.Close()
			conn = hold()
		}
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("shop's refund beside its one in flight at a share of 1: %d, Retry-After %q; want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var rejected int
	err := p.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM client_requests c JOIN tenants t ON t.id = c.tenant_id
WHERE t.name = 'shop' AND c.kind = 'refund' AND c.answer = 'rejected' AND c.request_ref = $1`, ref).Scan(&rejected)
	if err != nil || rejected != 1 {
		t.Errorf("shop's refund refused beyond its share (%s) recorded as %d rejected client requests (%v), want 1", ref, rejected, err)
	}
	other, err := p.DB.EnsureTenant(context.Background(), "bank")
	if err != nil {
		t.Fatal(err)
	}
	otherToken, err := p.DB.CreateToken(context.Background(), other.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	if resp := postRefundAs(t, p, otherToken, "bank-1"); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("another tenant's empty refund while shop is at its share: %d, want 422 (read and refused as incomplete)", resp.StatusCode)
	}
}

// postRefundAs posts an empty refund with token and the request reference ref to p's API
// and returns the answer, its body closed.
func postRefundAs(t *testing.T, p *Program, token, ref string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.URL()+"/api/v1/refunds", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Ref", ref)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
