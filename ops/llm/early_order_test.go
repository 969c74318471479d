package llm

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// discard is a client that takes whatever it is sent.
type discard struct{}

func (discard) Begin(Head) error   { return nil }
func (discard) Write([]byte) error { return nil }

// TestTheFlightSaysAnsweredBeforeTheClientIsReleased: the moment an early answer releases
// its request, the client has its answer and may send the key again at once; that repeat
// waits for the close and is replayed only if the flight already says its client was
// answered (afterEarlyAnswer), and is told 409 in flight otherwise. So the flight is marked
// before the release, never after it on a goroutine the scheduler may hold back (ops rules
// 2, 3: the repeat sends nothing either way, but it must get the answer, not a refusal).
func TestTheFlightSaysAnsweredBeforeTheClientIsReleased(t *testing.T) {
	g := &Gateway{flights: newHub()}
	for _, stream := range []bool{false, true} {
		f := g.flights.open("op-early-order", stream)
		x := &exchange{g: g, ctx: context.Background(), api: chatAPI{}, req: &request{api: chatAPI{}, Stream: stream},
			out: discard{}, began: stream, early: make(chan struct{})}
		var marked bool
		released := make(chan struct{})
		go func() {
			<-x.early
			marked = f.answered.Load()
			close(released)
		}()
		res := ops.AttemptResult{Outcome: ops.OutcomeOK, Result: &ops.Result{Body: []byte(`{}`)}}
		x.answerEarly(&ops.Operation{ID: "op-early-order"}, &ops.Attempt{N: 1}, res, Reply{}, []byte(`{}`), f)
		<-released
		if !marked {
			t.Fatalf("stream %v: the client was released before its flight said it was answered", stream)
		}
	}
}
