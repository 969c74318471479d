package httppost_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/httppost"
)

// TestAFailedPostNamesTheHostAndTheReasonOnly posts to receivers that fail in every way a
// post fails, each at a URL whose path, query and userinfo hold a secret, and one that
// echoes its request line in its reason phrase and body. Each error names the receiver's
// host and the status or a transport reason, and never the secret.
func TestAFailedPostNamesTheHostAndTheReasonOnly(t *testing.T) {
	t.Parallel()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such hook: "+r.URL.String(), http.StatusNotFound)
	}))
	defer echo.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	defer slow.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer tlsSrv.Close()
	phrase := rawServer(t, "HTTP/1.1 403 SECRET path /services/SECRET\r\nContent-Length: 6\r\n\r\nSECRET")
	hangup := rawServer(t, "")

	host := func(u string) string { return strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://") }
	const secret = "/services/SECRET?token=SECRET"
	for _, tc := range []struct {
		name, url, want string
		client          *http.Client
	}{
		{"refused", "http://user:SECRET@127.0.0.1:1" + secret, "post to 127.0.0.1:1: connection refused", nil},
		{"answered 404 with the URL", echo.URL + secret, "post to " + host(echo.URL) + ": answered 404 Not Found", nil},
		{"reason phrase", "http://" + phrase + secret, "post to " + phrase + ": answered 403 Forbidden", nil},
		{"hung up", "http://" + hangup + secret, "post to " + hangup + ": connection closed before an answer", nil},
		{"timed out", slow.URL + secret, "post to " + host(slow.URL) + ": timed out", &http.Client{Timeout: 100 * time.Millisecond}},
		{"untrusted certificate", tlsSrv.URL + secret, "post to " + host(tlsSrv.URL) + ": the receiver's TLS certificate was refused", nil},
		{"not a URL", "http://127.0.0.1:SECRET" + secret, "post to the receiver: the receiver's URL is not an http(s) URL", nil},
		{"not http", "ftp://user:SECRET@127.0.0.1" + secret, "post to the receiver: the receiver's URL is not an http(s) URL", nil},
	} {
		err := httppost.JSON(context.Background(), tc.client, tc.url, "ev-1", []byte(`{}`))
		var pe *httppost.Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: error %v (%T), want an *httppost.Error", tc.name, err, err)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %q, want %q and no secret", tc.name, err, tc.want)
		}
	}
}

// rawServer answers each connection with answer as it is and closes it, after reading the
// request's head; an empty answer closes the connection without a word.
func rawServer(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			_, _ = c.Write([]byte(answer))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestAPostCarriesTheEventID: the receiver gets the body as JSON with the event id, and a
// 2xx is success.
func TestAPostCarriesTheEventID(t *testing.T) {
	t.Parallel()
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	if err := httppost.JSON(context.Background(), nil, srv.URL+"/hook", "ev-1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if got.Get("Settle-Event-Id") != "ev-1" || got.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", got)
	}
}
