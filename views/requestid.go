package views

import "context"

type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the request being answered, so the error
// page can show it: a person quotes it, an engineer finds the log line.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
