// Package reqlog carries one request's identifiers to every log line written while serving
// it, and to the client request row the ledger records for it, so that an on-call engineer
// goes from a log line to the operation and back.
//
// A request's context holds one small set of fields. The web edge starts it with Settle's
// request id; authentication adds the tenant; the key parser adds a hash of the
// Idempotency-Key; the ledger adds the operation id on admission and the provider's request
// id after each attempt. Fields added late still reach lines logged late, such as the
// edge's own line about the answer. Keys and prompts are never logged: only a prefix of
// the key's SHA-256, enough to find a client's retries of one key.
package reqlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
)

// The field names, as they appear in log lines.
const (
	RequestID         = "request_id"
	Tenant            = "tenant"
	OperationID       = "operation_id"
	ProviderRequestID = "provider_request_id"
	KeyHash           = "idempotency_key_sha256"
)

// order is the order fields are logged in.
var order = [...]string{RequestID, Tenant, OperationID, ProviderRequestID, KeyHash}

type fields struct {
	mu     sync.Mutex
	values [len(order)]string
}

type ctxKey struct{}

// Start returns ctx carrying a new set of fields for the request with this id.
func Start(ctx context.Context, requestID string) context.Context {
	f := &fields{}
	f.values[0] = requestID
	return context.WithValue(ctx, ctxKey{}, f)
}

// Set records one field of the request in ctx; outside a request it does nothing. A
// streaming request logs from more than one goroutine, hence the lock.
func Set(ctx context.Context, name, value string) {
	f, _ := ctx.Value(ctxKey{}).(*fields)
	if f == nil || value == "" {
		return
	}
	for i, n := range order {
		if n == name {
			f.mu.Lock()
			f.values[i] = value
			f.mu.Unlock()
			return
		}
	}
}

// Detach returns ctx carrying a copy of its request's fields, for work that goes on after
// the request was answered (an LLM call's close): its lines are logged with the fields
// known so far, and what it sets stays in its copy, since the request's own were read by
// the edge when it answered. Outside a request it returns ctx.
func Detach(ctx context.Context) context.Context {
	f, _ := ctx.Value(ctxKey{}).(*fields)
	if f == nil {
		return ctx
	}
	c := &fields{}
	f.mu.Lock()
	c.values = f.values
	f.mu.Unlock()
	return context.WithValue(ctx, ctxKey{}, c)
}

// Get returns one field of the request in ctx, or "".
func Get(ctx context.Context, name string) string {
	f, _ := ctx.Value(ctxKey{}).(*fields)
	if f == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, n := range order {
		if n == name {
			return f.values[i]
		}
	}
	return ""
}

// HashKey is the part of an Idempotency-Key's SHA-256 that log lines carry: 12 hex digits
// tell a client's keys apart without making a key recoverable from the logs.
func HashKey(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

// Handler wraps a log handler so that every record logged with a request's context carries
// the request's fields that are known by then.
// Wrapping twice adds nothing.
func Handler(h slog.Handler) slog.Handler {
	if _, ok := h.(handler); ok {
		return h
	}
	return handler{h}
}

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, rec slog.Record) error {
	if f, _ := ctx.Value(ctxKey{}).(*fields); f != nil {
		f.mu.Lock()
		for i, v := range f.values {
			if v != "" {
				rec.AddAttrs(slog.String(order[i], v))
			}
		}
		f.mu.Unlock()
	}
	return h.Handler.Handle(ctx, rec)
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler { return handler{h.Handler.WithAttrs(as)} }

func (h handler) WithGroup(name string) slog.Handler { return handler{h.Handler.WithGroup(name)} }
