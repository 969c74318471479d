package llm_test

import (
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// A phase is progress for the people watching a call, not a fact a rule rests on (ops rule 5
// holds an unfinished attempt uncertain whatever its phase), so the gateway writes one only
// once it has lasted a second: a stream that ends sooner costs its open and its close alone,
// and a longer one shows its first token on the dashboard from its second second on.
func TestLLMPhaseIsWrittenOnceItHasLastedASecond(t *testing.T) {
	t.Parallel()
	// A stream of about four seconds on a lease far longer, so that no renewal writes the
	// phase along with the lease.
	w := newGatewayWorld(t, gatewaySetup{chunkDelay: 150 * time.Millisecond, lease: time.Minute})
	done := make(chan *reply, 1)
	go func() {
		r, _ := w.call("shop", "phase-1", chatBody("a long answer", 0.2, true))
		done <- r
	}()
	w.waitAdmitted(t, "phase-1")
	time.Sleep(500 * time.Millisecond) // well into the stream, under a second of it
	if op := w.op(t, "phase-1"); op.Status != ops.StatusInProgress || op.Phase == ops.PhaseFirstToken {
		t.Fatalf("half a second into the stream: status %s, phase %q; want in progress with the first token not yet written", op.Status, op.Phase)
	}
	deadline := time.Now().Add(2500 * time.Millisecond)
	for op := w.op(t, "phase-1"); op.Phase != ops.PhaseFirstToken; op = w.op(t, "phase-1") {
		if op.Status != ops.StatusInProgress || time.Now().After(deadline) {
			t.Fatalf("the stream's first token was not written while it went on: status %s, phase %q", op.Status, op.Phase)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if text, _, ok := streamText(t, <-done); !ok || text != w.generations(t, 1)[0].Content {
		t.Fatalf("stream %q (complete %v)", text, ok)
	}
	w.waitStatus(t, "phase-1", ops.StatusSucceeded)
}
