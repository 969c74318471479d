package pg_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestBodiesAreStoredWithLZ4: a streamed LLM call's request, answer and stream events,
// each past the size at which Postgres compresses a value, are stored compressed with lz4,
// the cheaper of the server's two methods, and read back byte for byte. A server built
// without lz4 keeps pglz, so the test is skipped there.
func TestBodiesAreStoredWithLZ4(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// Asked in a transaction rolled back, so that no pooled session keeps lz4 as its default.
	tx, err := f.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, `SET LOCAL default_toast_compression = 'lz4'`)
	_ = tx.Rollback(ctx)
	if err != nil {
		t.Skipf("this server has no lz4: %v", err)
	}
	prompt := strings.Repeat("the long history of this chat ", 200)
	request := []byte(`{"policy":"interactive","route":"/v1/chat/completions","stream":true,"body":{"model":"fake-small","stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}}`)
	var events bytes.Buffer
	events.WriteString(`{"attempt":1,"events":[`)
	for i := range 30 {
		if i > 0 {
			events.WriteByte(',')
		}
		fmt.Fprintf(&events, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764800000,"model":"fake-small","choices":[{"index":0,"delta":{"content":" word%d"},"finish_reason":null}]}`, i)
	}
	events.WriteString(`]}`)
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + prompt + `"}}]}`)

	in := ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai", IntentKey: "k-lz4", Fingerprint: "fp-lz4",
		Request: request, Retention: 24 * time.Hour}
	o, err := f.seed().Open(ctx, in, "req-lz4", "gw")
	if err != nil {
		t.Fatal(err)
	}
	op, err := f.seed().Finish(ctx, o.Op, o.Attempt, "gw", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
		Result: &ops.Result{ProviderRef: "chatcmpl-1", Body: answer, Events: events.Bytes()}})
	if err != nil {
		t.Fatal(err)
	}
	var reqMethod, resMethod, evMethod string
	err = f.db.Pool.QueryRow(ctx, `SELECT coalesce(pg_column_compression(request), ''), coalesce(pg_column_compression(result), ''),
		coalesce(pg_column_compression(stream_events), '') FROM operations WHERE id = $1`, op.ID).Scan(&reqMethod, &resMethod, &evMethod)
	if err != nil {
		t.Fatal(err)
	}
	if reqMethod != "lz4" || resMethod != "lz4" || evMethod != "lz4" {
		t.Errorf("compression of request, result, stream events: %q, %q, %q; want lz4 for each", reqMethod, resMethod, evMethod)
	}
	stored, err := f.db.StreamEvents(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stored, events.Bytes()) {
		t.Errorf("stream events read back differ from those stored:\n%s\nwant\n%s", stored, events.Bytes())
	}
}
