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
	// The write's own time, not when a poll happens to notice it, is what the rule is about:
	// the stream is sent after its operation is created, so a phase that lasted a second
	// is written at least a second after that, however late this loop looks.
	admitted := w.op(t, "phase-1")
	op := admitted
	for ; op.Phase != ops.PhaseFirstToken; op = w.op(t, "phase-1") {
		if op.Status != ops.StatusInProgress {
			t.Fatalf("the stream's first token was not written while it went on: status %s, phase %q", op.Status, op.Phase)
		}
		if op.Phase != admitted.Phase {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lasted := op.UpdatedAt.Sub(op.CreatedAt); lasted < time.Second {
		t.Fatalf("phase %q written %v into the stream, want once it has lasted a second", op.Phase, lasted)
	}
	// A phase written first (sent_to_provider, when the first token came late) gives way to
	// the first token while the stream goes on.
	for ; op.Phase != ops.PhaseFirstToken; op = w.op(t, "phase-1") {
		if op.Status != ops.StatusInProgress {
			t.Fatalf("the stream's first token was not written while it went on: status %s, phase %q", op.Status, op.Phase)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if text, _, ok := streamText(t, <-done); !ok || text != w.generations(t, 1)[0].Content {
		t.Fatalf("stream %q (complete %v)", text, ok)
	}
	w.waitStatus(t, "phase-1", ops.StatusSucceeded)
}
