package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"
)

// reverseProxyMain serves `settle-load reverse-proxy`: a plain httputil.ReverseProxy in
// front of -upstream (and of -anthropic for Anthropic's /v1/messages, as Settle serves both
// APIs on one address), the floor the gateway benchmark measures Settle against. It runs as
// its own process, as Settle does, so each has its own runtime, CPU time and memory. Its
// pool keeps as many upstream connections as the benchmark ever has in flight, so it never
// opens one per request; streams are flushed chunk by chunk.
func reverseProxyMain(args []string) int {
	fs := flag.NewFlagSet("settle-load reverse-proxy", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	upstream := fs.String("upstream", "", "the server proxied to, e.g. http://127.0.0.1:8080")
	messages := fs.String("anthropic", "", "the server /v1/messages is proxied to; default -upstream")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *messages == "" {
		*messages = *upstream
	}
	u, err := url.Parse(*upstream)
	m, merr := url.Parse(*messages)
	if err != nil || u.Host == "" || merr != nil || m.Host == "" {
		fmt.Fprintf(os.Stderr, "settle-load reverse-proxy: -upstream %q or -anthropic %q is not a URL\n", *upstream, *messages)
		return 2
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.DisableCompression = 0, 4096, true
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			if r.In.URL.Path == "/v1/messages" {
				r.SetURL(m)
				return
			}
			r.SetURL(u)
		},
		Transport:     tr,
		FlushInterval: -1,
	}
	srv := &http.Server{Addr: *addr, Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "settle-load reverse-proxy:", err)
		return 1
	}
	return 0
}
