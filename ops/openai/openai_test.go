package openai

import (
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// readAll reads an SSE body as the Client's sender does and returns the events it passed on.
func readAll(t *testing.T, sse string) (llm.Reply, []string) {
	t.Helper()
	o := newSender(Config{IdleTimeout: time.Minute})
	idle := time.NewTimer(time.Minute)
	defer idle.Stop()
	var got []string
	r := o.ReadStream(llm.Reply{}, strings.NewReader(sse), llm.Call{Event: func(d []byte, _ bool) error {
		got = append(got, string(d))
		return nil
	}}, idle)
	return r, got
}

func TestReadStreamPassesEventsLongerThanItsBuffer(t *testing.T) {
	long := `{"choices":[{"delta":{"content":"` + strings.Repeat("ж", 40_000) + `"}}]}`
	r, got := readAll(t, "data: {\"a\":1}\n\ndata: "+long+"\r\n\r\ndata: [DONE]\n\n")
	if r.Outcome != ops.OutcomeOK || len(got) != 2 || got[0] != `{"a":1}` || got[1] != long {
		t.Fatalf("outcome %s, %d events, lengths %v", r.Outcome, len(got), lengths(got))
	}
}

func TestReadStreamErrorEventIsUncertain(t *testing.T) {
	for _, sse := range []string{
		"data: {\"a\":1}\n\ndata: {\"error\":{\"message\":\"overloaded\"}}\n\n",
		"data: {\"error\": {\"message\": \"" + strings.Repeat("x", 10_000) + "\"}}\n\ndata: [DONE]\n\n",
	} {
		r, _ := readAll(t, sse)
		if r.Outcome != ops.OutcomeTimeout || r.ErrorCode != "upstream_stream_error" {
			t.Fatalf("outcome %s %s, want timeout upstream_stream_error", r.Outcome, r.ErrorCode)
		}
	}
	// A content that mentions "error" is not an error event; a null error neither.
	r, got := readAll(t, "data: {\"choices\":[{\"delta\":{\"content\":\"\\\"error\\\" is a word\"}}],\"error\":null}\n\ndata: [DONE]\n\n")
	if r.Outcome != ops.OutcomeOK || len(got) != 1 {
		t.Fatalf("outcome %s %s, %d events", r.Outcome, r.ErrorCode, len(got))
	}
}

func TestReadStreamWithoutDoneBroke(t *testing.T) {
	r, got := readAll(t, "data: {\"a\":1}\n\ndata: {\"a\":2}\n\n")
	if r.Outcome != ops.OutcomeTimeout || r.ErrorCode != "stream_broken" || len(got) != 2 {
		t.Fatalf("outcome %s %s, %d events", r.Outcome, r.ErrorCode, len(got))
	}
}

// An API whose stream sends no [DONE] (the Responses API) ends well when its events made a
// whole answer, and broke when they did not.
func TestReadStreamEndsWholeWithoutDone(t *testing.T) {
	for _, whole := range []bool{true, false} {
		o := newSender(Config{IdleTimeout: time.Minute})
		idle := time.NewTimer(time.Minute)
		n := 0
		r := o.ReadStream(llm.Reply{}, strings.NewReader("event: a\ndata: {\"a\":1}\n\nevent: b\ndata: {\"a\":2}\n\n"),
			llm.Call{Event: func([]byte, bool) error { n++; return nil }, Whole: func() bool { return whole && n == 2 }}, idle)
		idle.Stop()
		if want := map[bool]ops.Outcome{true: ops.OutcomeOK, false: ops.OutcomeTimeout}[whole]; r.Outcome != want || n != 2 {
			t.Fatalf("whole %v: outcome %s %s after %d events", whole, r.Outcome, r.ErrorCode, n)
		}
	}
}

func lengths(s []string) []int {
	var n []int
	for _, x := range s {
		n = append(n, len(x))
	}
	return n
}
