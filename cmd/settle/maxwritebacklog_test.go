package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// SETTLE_MAX_WRITE_BACKLOG defaults to 250ms, takes a Go duration or off (0 and off: no
// limit), and anything else stops serve and demo with one line and exit status 2.
func TestMaxWriteBacklogIsConfigured(t *testing.T) {
	t.Parallel()
	db := "postgres://u@127.0.0.1:1/x"
	for v, want := range map[string]time.Duration{"": 250 * time.Millisecond, "250ms": 250 * time.Millisecond,
		"1s": time.Second, " 50ms ": 50 * time.Millisecond, "0": 0, "0s": 0, "off": 0} {
		cfg, err := LoadConfig([]string{"serve"}, env(map[string]string{"DATABASE_URL": db, "SETTLE_MAX_WRITE_BACKLOG": v}), t.TempDir())
		if err != nil || cfg.Web.MaxWriteBacklog != want {
			t.Errorf("SETTLE_MAX_WRITE_BACKLOG=%q: %v, %v; want %v", v, cfg.Web.MaxWriteBacklog, err, want)
		}
	}
	for _, v := range []string{"lots", "250", "-1s", "1.5", "on"} {
		for _, args := range [][]string{{"serve"}, {"demo"}} {
			code, stdout, stderr := run(t, args, map[string]string{"DATABASE_URL": db, "SETTLE_MAX_WRITE_BACKLOG": v}, "")
			want := `SETTLE_MAX_WRITE_BACKLOG="` + v + `" is not a duration`
			if code != 2 || stdout != "" || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("settle %v with SETTLE_MAX_WRITE_BACKLOG=%s: exit %d, stderr %q; want 2 and one line with %q", args, v, code, stderr, want)
			}
		}
	}
}

// serve hands its database's write backlog and SETTLE_MAX_WRITE_BACKLOG to its API: while
// ledger writes wait behind a lock longer than the limit, an API request is shed with 503
// and Retry-After: 1 before its token is read (ops rule 8: no tenant, nothing recorded);
// once the writes are through, the same request reaches the token check again.
func TestServeShedsWhenTheWriteBacklogIsOverItsLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := serveWith(t, map[string]string{"SETTLE_MAX_WRITE_BACKLOG": "5ms"})
	tx, err := p.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE operations IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	// One write at a time, each stalling a group-commit flusher, until one waits for a batch.
	done := make(chan struct{}, 5)
	writes := 0
	for p.DB.WriteBacklog() <= 10*time.Millisecond {
		if writes == cap(done) {
			t.Fatalf("%d ledger writes stalled and none waits for a batch", writes)
		}
		go func(i int) {
			_, _ = p.Ledger.Admit(ctx, ops.Intent{TenantID: 1, Kind: ops.KindRefund, Provider: "stripe",
				IntentKey: fmt.Sprintf("ord-%d:100:usd", i), Fingerprint: "fp", OrderRef: fmt.Sprintf("ord-%d", i),
				AmountCents: 100, Currency: "usd", Retention: time.Hour, RequestRef: fmt.Sprintf("req-%d", i), Owner: "w"})
			done <- struct{}{}
		}(writes)
		writes++
		time.Sleep(100 * time.Millisecond)
	}
	post := func() *http.Response { return postEmptyRefund(t, p) }
	if resp := post(); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("an API request behind a %v write backlog: %d, Retry-After %q; want 503 and 1", p.DB.WriteBacklog(), resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range writes {
		<-done
	}
	if resp := post(); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an API request without a token once the writes are through: %d, want 401", resp.StatusCode)
	}
}
