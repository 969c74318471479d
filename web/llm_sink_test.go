package web

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/llm"
)

// deadlines is a response that records the write deadlines set on its connection.
type deadlines struct {
	*httptest.ResponseRecorder
	set []time.Time
}

func (d *deadlines) SetWriteDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}

// Every write of a stream has a deadline at least 63/64 of the timeout after it began, so a
// client that stops reading is let go about the timeout later, while a stream's events,
// written milliseconds apart, do not each move the connection's deadline.
func TestStreamWritesKeepTheirDeadlineWithoutMovingItEachTime(t *testing.T) {
	const timeout = 10 * time.Second
	rw := &deadlines{ResponseRecorder: httptest.NewRecorder()}
	k := &httpSink{w: rw, rc: http.NewResponseController(rw), timeout: timeout}
	if err := k.Begin(llm.Head{Stream: true}); err != nil {
		t.Fatal(err)
	}
	const writes = 50
	for i := range writes {
		before := time.Now()
		var err error
		switch i % 3 {
		case 0:
			err = k.Write([]byte("data: {}\n\n"))
		case 1:
			err = k.Hold([]byte("data: {}\n\n"))
		default:
			err = k.Flush()
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(rw.set) == 0 || rw.set[len(rw.set)-1].Before(before.Add(timeout-timeout/64)) {
			t.Fatalf("write %d, begun at %v, has the deadline %v: less than 63/64 of %v", i, before, rw.set, timeout)
		}
	}
	if len(rw.set) >= writes {
		t.Fatalf("%d deadlines set for %d writes a moment apart", len(rw.set), writes)
	}
}

// countedConn counts the writes a server makes to one client's connection.
type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countedConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// countedListener hands out connections that count their writes.
type countedListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countedConn{Conn: c, writes: &l.writes}, nil
}

// A stream costs its client's connection one send per burst of events and no more: its head
// goes with its first event, and its closing event with the end of the response, rather than
// each alone. The first event still reaches the client at once, before anything follows it.
func TestAStreamSendsItsHeadAndItsEndWithItsEvents(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countedListener{Listener: ln}
	first := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := &httpSink{w: w, rc: http.NewResponseController(w), timeout: 10 * time.Second}
		if err := k.Begin(llm.Head{Stream: true, OperationID: "op-1"}); err != nil {
			t.Error(err)
			return
		}
		_ = k.Write([]byte("id: 1-1\ndata: {\"n\":1}\n\n"))
		select {
		case <-first:
		case <-time.After(10 * time.Second):
			t.Error("the first event did not reach the client before the next was written")
		}
		_ = k.Hold([]byte("id: 1-2\ndata: {\"n\":2}\n\n"))
		_ = k.Write([]byte("id: 1-3\ndata: {\"n\":3}\n\n"))
		_ = k.End([]byte("data: [DONE]\n\n"))
	}))
	srv.Listener.Close()
	srv.Listener = cl
	srv.Start()
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Settle-Operation-Id") != "op-1" || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("head %v", resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	var got strings.Builder
	for {
		line, err := br.ReadString('\n')
		got.WriteString(line)
		if line == "data: {\"n\":1}\n" {
			close(first)
		}
		if err != nil {
			break
		}
	}
	want := "id: 1-1\ndata: {\"n\":1}\n\nid: 1-2\ndata: {\"n\":2}\n\nid: 1-3\ndata: {\"n\":3}\n\ndata: [DONE]\n\n"
	if got.String() != want {
		t.Fatalf("the client read %q, want %q", got.String(), want)
	}
	// The head with the first event, the second and third events together, [DONE] with the
	// chunked body's end: three sends, where the head and [DONE] alone made five.
	if n := cl.writes.Load(); n != 3 {
		t.Fatalf("the stream took %d writes to the connection, want 3", n)
	}
}
