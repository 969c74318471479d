package web_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestMetricsMethodLabelIsBounded: any client, before it shows a token, chooses the method
// of its request line, and Go's server takes any token there. Labelled as sent, each new
// method (up to the header limit of a megabyte each) made new series of
// http_requests_total and http_request_duration_seconds that the process keeps until it
// restarts: /metrics and memory grew with every request. Only the methods HTTP defines
// are labelled by name; every other is counted as "other".
func TestMetricsMethodLabelIsBounded(t *testing.T) {
	t.Parallel()
	s, tw := newServer(t)
	h := s.Handler()
	e := start(t, tw, h)
	c := client(t)
	long := strings.Repeat("X", 4096)
	for i := 0; i < 40; i++ {
		for _, path := range []string{"/api/v1/whoami", "/v1/chat/completions", "/ops", "/nowhere"} {
			req, err := http.NewRequest(fmt.Sprintf("M%s%03d", long, i), e.url+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	if req, _ := http.NewRequest(http.MethodGet, e.url+"/nowhere", nil); req != nil {
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	resp, body := e.get(t, c, "/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics = %d", resp.StatusCode)
	}
	methods := map[string]bool{}
	for _, m := range regexp.MustCompile(`method="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		methods[m[1]] = true
	}
	for m := range methods {
		switch m {
		case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "other":
		default:
			t.Errorf("a method label taken from the request line: %.40q...", m)
		}
	}
	if !methods["other"] || !methods["GET"] {
		t.Errorf("the made-up methods should be counted as other, GET as GET; labels %v", len(methods))
	}
	if len(body) > 200_000 {
		t.Errorf("/metrics is %d bytes after 160 requests", len(body))
	}
}
