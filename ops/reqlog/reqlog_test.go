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

// Work detached from its request logs with the fields known when it was detached, and what
// it sets later does not reach the request's own fields, which the edge read as it answered.
func TestDetachCopiesTheFields(t *testing.T) {
	ctx := reqlog.Start(context.Background(), "r1")
	reqlog.Set(ctx, reqlog.OperationID, "op-1")
	d := reqlog.Detach(ctx)
	reqlog.Set(d, reqlog.ProviderRequestID, "req-late")
	if reqlog.Get(d, reqlog.OperationID) != "op-1" || reqlog.Get(d, reqlog.RequestID) != "r1" || reqlog.Get(d, reqlog.ProviderRequestID) != "req-late" {
		t.Error("the detached fields lost what the request knew, or what was set on them")
	}
	if reqlog.Get(ctx, reqlog.ProviderRequestID) != "" {
		t.Error("a field set after detaching reached the request's own fields")
	}
	if bg := context.Background(); reqlog.Detach(bg) != bg {
		t.Error("Detach outside a request changed the context")
	}
}
