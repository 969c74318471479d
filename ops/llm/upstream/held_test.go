package upstream_test

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/racedetect"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/llm/upstream"
)

// heldStreams reads n streams at once, each through a pipe, and returns the heap bytes
// each holds once its first event was passed on and it waits for the provider's next:
// what a streamed call in flight keeps between two events.
func heldStreams(t *testing.T, n int, event string) int64 {
	t.Helper()
	s := upstream.Sender{IdleTimeout: time.Minute}
	ws := make([]*io.PipeWriter, n)
	rs := make([]*io.PipeReader, n)
	idles := make([]*time.Timer, n)
	passed := make(chan struct{}, n)
	call := llm.Call{Stream: true, Event: func([]byte, bool) error { passed <- struct{}{}; return nil }}
	for i := range n {
		rs[i], ws[i] = io.Pipe()
		idles[i] = time.NewTimer(time.Minute)
	}
	var before, during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { s.ReadStream(llm.Reply{}, rs[i], call, idles[i]) })
		if _, err := io.WriteString(ws[i], event); err != nil {
			t.Fatal(err)
		}
		<-passed
	}
	runtime.GC()
	runtime.ReadMemStats(&during)
	for i := range n {
		ws[i].Close()
		idles[i].Stop()
	}
	wg.Wait()
	return (int64(during.HeapAlloc) - int64(before.HeapAlloc)) / int64(n)
}

// A streamed call in flight holds its stream's read buffer from its first event to its
// last, however long the provider takes between two: at hundreds of calls in flight the
// buffers are a large share of the gateway's memory. The provider's events are a few
// hundred bytes; the buffer holds a few of them, not 4 KiB. A longer event is gathered
// from the buffer's reads (TestReadStreamGathersALongEvent).
func TestAStreamBetweenTwoEventsHoldsASmallBuffer(t *testing.T) {
	event := "data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", 200) + "\"}}]}\n\n"
	got := heldStreams(t, 200, event)
	// The pipe's and the goroutine's own records come to a few hundred bytes; under the
	// race detector sync.Pool drops some of what is put back and objects are larger.
	limit := int64(2048)
	if racedetect.Enabled {
		limit = 4096
	}
	if got > limit {
		t.Errorf("a stream waiting for its next event holds %d bytes of heap, want at most %d", got, limit)
	}
	t.Logf("%d bytes held per stream between two events", got)
}

// Every connection to the provider keeps its write buffer from its dial to its close, in
// flight and idle alike, though it only writes a request's head and body: at hundreds of
// calls in flight the transport's default of 4 KiB each is megabytes held for nothing.
func TestTheProvidersConnectionsWriteThroughASmallBuffer(t *testing.T) {
	_, _, client := upstream.Defaults(0, 0, nil)
	tr, ok := client.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("the default client's transport is a %T", client.Transport)
	}
	if tr.WriteBufferSize <= 0 || tr.WriteBufferSize > 1<<10 {
		t.Errorf("write buffer of %d bytes per connection (0: the transport's 4 KiB), want at most 1 KiB", tr.WriteBufferSize)
	}
	if tr.MaxIdleConnsPerHost != 64 {
		t.Errorf("%d idle connections kept, want 64", tr.MaxIdleConnsPerHost)
	}
}
