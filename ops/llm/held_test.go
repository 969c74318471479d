package llm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/llm"
)

// heldSends is the provider's adapter with a hold a test arms for the gateway's next send:
// the send stops where the test says and stays there until the test lets it go. A test that
// asserts what happens while a call is in flight holds the call instead of hoping the
// provider is still generating when the assertion runs, which on a busy machine it may not
// be.
type heldSends struct {
	llm.Upstream
	mu    sync.Mutex
	armed *sendHold
}

// sendHold is one armed hold: reached is closed once the send stopped, release lets it go.
type sendHold struct {
	events  int
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

// holdNext arms a hold for the next send: a stream stops once the gateway has relayed its
// first events events to its client, and a send with events 0 stops once the provider has
// answered, before the gateway reads the answer.
func (h *heldSends) holdNext(t *testing.T, events int) *sendHold {
	t.Helper()
	x := &sendHold{events: events, reached: make(chan struct{}), release: make(chan struct{})}
	h.mu.Lock()
	h.armed = x
	h.mu.Unlock()
	t.Cleanup(x.let)
	return x
}

func (h *heldSends) Send(ctx context.Context, c llm.Call) llm.Reply {
	h.mu.Lock()
	x := h.armed
	h.armed = nil
	h.mu.Unlock()
	if x == nil {
		return h.Upstream.Send(ctx, c)
	}
	if x.events > 0 && c.Event != nil {
		relay, n := c.Event, 0
		c.Event = func(d []byte, more bool) error {
			// The stream holds after this event, so it goes out at once (more false), as
			// before any wait for the provider.
			n++
			err := relay(d, more && n != x.events)
			if n == x.events {
				x.hold()
			}
			return err
		}
	}
	r := h.Upstream.Send(ctx, c)
	if x.events == 0 {
		x.hold()
	}
	return r
}

func (x *sendHold) hold() {
	close(x.reached)
	<-x.release
}

// wait waits until the held send has stopped.
func (x *sendHold) wait(t *testing.T) {
	t.Helper()
	select {
	case <-x.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the held send did not reach its hold within 10 s")
	}
}

// let lets the held send go on; it may be called more than once.
func (x *sendHold) let() { x.once.Do(func() { close(x.release) }) }
