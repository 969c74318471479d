package upstream_test

import (
	"io"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/racedetect"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/llm/upstream"
)

// reads is a provider's stream as it reaches Settle: each Read returns the next part, as a
// read of the connection returns what has arrived so far.
type reads struct{ parts []string }

func (r *reads) Read(p []byte) (int, error) {
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	if r.parts[0] = r.parts[0][n:]; r.parts[0] == "" {
		r.parts = r.parts[1:]
	}
	return n, nil
}

// An event is passed with more only when the provider's next event has arrived whole, so
// the gateway may hold it back without making it wait for the provider: an event whose
// successor is cut off, or is only a comment or an event name without data so far, or
// which is the last before a read, goes with more false. The events themselves are passed
// whole and in order whatever the reads cut them into.
func TestReadStreamSaysWhenTheNextEventIsAlreadyRead(t *testing.T) {
	stream := &reads{parts: []string{
		"data: {\"n\":1}\n\ndata: {\"n\":2}\r\n\r\ndata: {\"n\":3}\n\ndata: {\"n\"",
		":4}\n\n: keep-alive\n\nevent: x\n",
		"data: {\"n\":5}\n\ndata:\n\ndata: {\"n\":6}\n\n",
		"data: {\"n\":7}\n\ndata: [DONE]\n\n",
	}}
	type got struct {
		data string
		more bool
	}
	var events []got
	s := upstream.Sender{IdleTimeout: time.Minute, Stream: upstream.StreamRules{Done: func(d []byte) bool { return string(d) == "[DONE]" }}}
	idle := time.NewTimer(time.Minute)
	defer idle.Stop()
	r := s.ReadStream(llm.Reply{}, stream, llm.Call{Event: func(d []byte, more bool) error {
		events = append(events, got{string(d), more})
		return nil
	}}, idle)
	want := []got{
		{`{"n":1}`, true}, {`{"n":2}`, true}, {`{"n":3}`, false}, // 4 is cut off
		{`{"n":4}`, false}, // only a comment and an event name follow in that read
		{`{"n":5}`, true},  // an empty data line is no event: 6 is the next
		{`{"n":6}`, false}, // the last of its read
		{`{"n":7}`, true},  // [DONE] has come: the stream ends without a wait
	}
	if r.Outcome != ops.OutcomeOK || len(events) != len(want) {
		t.Fatalf("outcome %s, events %+v, want %+v", r.Outcome, events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("event %d: %+v, want %+v (all: %+v)", i+1, events[i], want[i], events)
		}
	}
}

// The data of each event is the call's to keep: the reader never writes into it again.
func TestReadStreamEventDataIsTheCallsToKeep(t *testing.T) {
	stream := &reads{parts: []string{"data: {\"n\":1}\n\ndata: {\"n\":2}\n\n", "data: {\"n\":3}\n\ndata: [DONE]\n\n"}}
	s := upstream.Sender{IdleTimeout: time.Minute, Stream: upstream.StreamRules{Done: func(d []byte) bool { return string(d) == "[DONE]" }}}
	idle := time.NewTimer(time.Minute)
	defer idle.Stop()
	var kept [][]byte
	s.ReadStream(llm.Reply{}, stream, llm.Call{Event: func(d []byte, _ bool) error {
		kept = append(kept, d)
		return nil
	}}, idle)
	for i, d := range kept {
		if want := `{"n":` + string(rune('1'+i)) + `}`; string(d) != want {
			t.Fatalf("event %d kept as %q, want %q", i+1, d, want)
		}
	}
}

// Reading a stream allocates its events' data and little else: the 4 KiB buffer it reads
// through is taken from the streams that ended before it, not made for each stream, and
// every event's data is still the call's to keep (TestReadStreamEventDataIsTheCallsToKeep).
func TestReadStreamReusesItsBuffer(t *testing.T) {
	const stream = "data: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: {\"n\":3}\n\ndata: [DONE]\n\n"
	s := upstream.Sender{IdleTimeout: time.Minute, Stream: upstream.StreamRules{Done: func(d []byte) bool { return string(d) == "[DONE]" }}}
	idle := time.NewTimer(time.Minute)
	defer idle.Stop()
	call := llm.Call{Event: func([]byte, bool) error { return nil }}
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := s.ReadStream(llm.Reply{}, &reads{parts: []string{stream}}, call, idle); r.Outcome != ops.OutcomeOK {
				b.Fatalf("outcome %s", r.Outcome)
			}
		}
	})
	// Under the race detector sync.Pool drops a quarter of what is put back, on purpose, so
	// about one read in four makes its buffer: still far under a buffer for every read.
	limit := int64(1024)
	if racedetect.Enabled {
		limit = 3 * 1024
	}
	if got := res.AllocedBytesPerOp(); got >= limit {
		t.Errorf("reading a stream of three short events allocated %d bytes, want under %d: a buffer of its own each time", got, limit)
	}
}
