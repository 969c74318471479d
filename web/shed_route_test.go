package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// A request shed under /api/v1 is counted under the route it asked for, as one on the
// gateway's routes is, though the shedder runs before the API's sub-router matches it: an
// operator must tell shed refunds from shed operation lookups and chat completions. The
// label stays a route pattern, never the path (an id in the path would make a series per
// request), and a path no route matches falls back to the mount's pattern. The warning
// names the same route.
func TestShedRequestsAreCountedByTheRouteTheyAskedFor(t *testing.T) {
	t.Parallel()
	const max = 2
	w := newShedWorld(t, max)
	w.fill(t, max)

	shed := []struct{ method, path, route string }{
		{http.MethodPost, "/api/v1/refunds", "/api/v1/refunds"},
		{http.MethodGet, "/api/v1/operations/op_shed_1", "/api/v1/operations/{id}"},
		{http.MethodGet, "/api/v1/operations/op_shed_2", "/api/v1/operations/{id}"},
		{http.MethodGet, "/api/v1/whoami", "/api/v1/whoami"},
		{http.MethodPost, "/api/v1/no-such-route", "/api/v1/*"},
		{http.MethodPost, "/v1/chat/completions", "/v1/chat/completions"},
		{http.MethodPost, "/mcp", "/mcp"},
	}
	for _, s := range shed {
		if st := w.sendMethod(t, s.method, s.path); st != http.StatusServiceUnavailable {
			t.Errorf("%s %s at the cap: %d, want 503", s.method, s.path, st)
		}
	}
	want := map[string]float64{}
	for _, s := range shed {
		want[s.route]++
	}
	for route, n := range want {
		got := metric(t, w.server.Registry, "settle_http_shed_total", map[string]string{"route": route, "reason": "in_flight"})
		if got != n {
			t.Errorf("settle_http_shed_total{route=%q,reason=in_flight}: %v, want %v", route, got, n)
		}
	}
	for _, route := range shedRoutes(t, w) {
		if _, ok := want[route]; !ok {
			t.Errorf("settle_http_shed_total has a series for route %q, which is no route shed here", route)
		}
	}
	// Every answered request is counted by route too; a shed one under the route it asked for.
	for route, n := range want {
		got := metric(t, w.server.Registry, "http_requests_total", map[string]string{"route": route, "code": "503"})
		if got != n {
			t.Errorf("http_requests_total{route=%q,code=503}: %v, want %v", route, got, n)
		}
	}
	// The first shed request makes the one warning of the second.
	if n := w.logs.count(t, "route", "/api/v1/refunds"); n != 1 {
		t.Errorf("%d warnings naming route /api/v1/refunds, want 1", n)
	}

	w.gate.release()
	for range max {
		<-w.calls
	}
}

// sendMethod sends an empty JSON object to path with method and the shop tenant's token,
// and returns the status.
func (w *shedWorld) sendMethod(t *testing.T, method, path string) int {
	t.Helper()
	var body *strings.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{}`)
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, w.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.tokens["shop"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// shedRoutes lists the route labels of settle_http_shed_total's series.
func shedRoutes(t *testing.T, w *shedWorld) []string {
	t.Helper()
	mfs, err := w.server.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, mf := range mfs {
		if mf.GetName() != "settle_http_shed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" {
					routes = append(routes, l.GetValue())
				}
			}
		}
	}
	return routes
}

// A request refused under /api/v1 before its route runs (here a token that names no tenant)
// is counted in the request metrics under the route it asked for, as a shed one is, not under
// the mount's pattern: an operator watching 401s on refunds must see them there.
func TestRefusedAPIRequestsAreCountedByTheRouteTheyAskedFor(t *testing.T) {
	t.Parallel()
	w := newShedWorld(t, 10)
	w.tokens["shop"] = "stl_not_a_token"
	if st := w.sendMethod(t, http.MethodPost, "/api/v1/refunds"); st != http.StatusUnauthorized {
		t.Fatalf("POST /api/v1/refunds with an unknown token: %d, want 401", st)
	}
	got := metric(t, w.server.Registry, "http_requests_total", map[string]string{"route": "/api/v1/refunds", "code": "401"})
	if got != 1 {
		t.Errorf("http_requests_total{route=/api/v1/refunds,code=401}: %v, want 1", got)
	}
}
