package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/settle-dev/settle/internal/testworld"
)

// A server started with SETTLE_OUTBOX_URL registers its receiver as the consumer of every
// event; started again without it, nobody delivers events any more, so the registration
// goes too: otherwise every change would go on writing an event that waits for nobody, and
// stays, undelivered and never pruned (ops rule 10: an event nobody receives is not written).
func TestRemovingTheOutboxURLStopsWritingEvents(t *testing.T) {
	t.Parallel()
	w := testworld.New(t)
	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer receiver.Close()
	serve := func(outboxURL string) {
		t.Helper()
		vars := map[string]string{"DATABASE_URL": w.DatabaseURL, "SETTLE_RECONCILE_INTERVAL": "off"}
		if outboxURL != "" {
			vars["SETTLE_OUTBOX_URL"] = outboxURL
		}
		cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0"}, env(vars), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		p := NewProgram(cfg, testLogger(t))
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		if err := p.Run(ctx); err != nil {
			t.Fatal(err)
		}
		stop()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	consumers := func() int {
		t.Helper()
		var n int
		if err := w.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_consumers`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	serve(receiver.URL)
	if n := consumers(); n != 1 {
		t.Fatalf("%d consumers with a receiver configured, want 1", n)
	}
	serve("")
	if n := consumers(); n != 0 {
		t.Fatalf("%d consumers left after the receiver was removed from the configuration, want none", n)
	}
}
