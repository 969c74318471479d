package web

import (
	"net/http"
	"net/http/httptest"
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
