package reqlog_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/settle-dev/settle/ops/reqlog"
)

// A field set late (the operation, after admission) reaches a line logged later with the
// request's context, even from another goroutine; outside a request nothing is added.
func TestFieldsReachEveryLineOfTheirRequest(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(reqlog.Handler(reqlog.Handler(slog.NewTextHandler(&buf, nil))))
	ctx := reqlog.Start(context.Background(), "r1")
	log.InfoContext(ctx, "early")
	var wg sync.WaitGroup
	for _, f := range []string{reqlog.Tenant, reqlog.OperationID, reqlog.ProviderRequestID} {
		wg.Add(1)
		go func() { defer wg.Done(); reqlog.Set(ctx, f, f+"-v") }()
	}
	wg.Wait()
	reqlog.Set(ctx, reqlog.KeyHash, reqlog.HashKey("k-1"))
	log.InfoContext(ctx, "late")
	log.InfoContext(context.Background(), "elsewhere")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %q", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "request_id=r1") || strings.Contains(lines[0], "tenant=") {
		t.Errorf("early line %q: want only the request id", lines[0])
	}
	for _, want := range []string{"request_id=r1", "tenant=tenant-v", "operation_id=operation_id-v",
		"provider_request_id=provider_request_id-v", "idempotency_key_sha256=" + reqlog.HashKey("k-1")} {
		if strings.Count(lines[1], want) != 1 {
			t.Errorf("late line %q: want %s once", lines[1], want)
		}
	}
	if strings.Contains(lines[2], "request_id") {
		t.Errorf("a line outside any request carries request fields: %q", lines[2])
	}
	if h := reqlog.HashKey("k-1"); len(h) != 12 || h == reqlog.HashKey("k-2") || reqlog.HashKey("") != "" {
		t.Errorf("HashKey: %q", h)
	}
	if reqlog.Get(ctx, reqlog.OperationID) != "operation_id-v" || reqlog.Get(context.Background(), reqlog.RequestID) != "" {
		t.Error("Get does not return what Set recorded")
	}
}
