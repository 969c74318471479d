package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/logbuf"
	"github.com/settle-dev/settle/internal/proctest"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// writeCounter is a stderr that counts the writes reaching it, as the kernel would count
// write(2) calls on the process's stderr.
type writeCounter struct {
	mu     sync.Mutex
	writes int
	buf    bytes.Buffer
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

func (w *writeCounter) counts() (writes int, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.buf.String()
}

// The access log of 'settle serve' reaches stderr in batches, not one write per request,
// and a clean stop writes every line logged before it.
func TestAccessLogIsWrittenInBatches(t *testing.T) {
	t.Parallel()
	addr := proctest.FreeAddr(t)
	vars := map[string]string{"DATABASE_URL": pgtest.URL(pgtest.NewDatabase(t)), "SETTLE_LOG_LEVEL": "info",
		"SETTLE_RECONCILE_INTERVAL": "off", "SETTLE_WORKERS": "0"}
	var stderr writeCounter
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"serve", "--addr", addr}, envList(vars), strings.NewReader(""), &bytes.Buffer{}, &stderr)
	}()
	base := "http://" + addr
	for i := 0; ; i++ {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i == 500 {
			t.Fatalf("serve did not answer on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	const requests = 200
	before, _ := stderr.counts()
	start := time.Now()
	for range requests {
		resp, err := http.Get(base + "/login")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	after, _ := stderr.counts()
	elapsed := time.Since(start)
	t.Logf("%d requests in %v: %d writes to stderr", requests, elapsed, after-before)
	// One write per access line was the cost; a batch holds every line of one interval, so
	// the writes are bounded by the intervals the requests took, and on a machine that serves
	// them in under two seconds by a tenth of the requests.
	want := max(requests/10, int(elapsed/logbuf.Interval)+2)
	if n := after - before; n > want {
		t.Errorf("%d requests in %v reached stderr in %d writes, want at most %d", requests, elapsed, n, want)
	}

	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	_, text := stderr.counts()
	if n := strings.Count(text, `msg="http request" method=GET route=/login`); n != requests {
		t.Errorf("stderr holds %d access lines of /login after a clean stop, want %d", n, requests)
	}
	if !strings.Contains(text, `msg="stopping:`) {
		t.Errorf("the stop's line is missing from stderr:\n%s", text)
	}
}
