package llm

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// durableRefs records how each provider id was asked to be recorded.
type durableRefs map[string]bool

func (d durableRefs) RecordAttemptRef(_ context.Context, _ string, _ int, ref string, durable bool) error {
	d[ref] = durable
	return nil
}

// TestStreamedIDWaitsForTheDiskOnlyWhereALookupReadsIt: a stream's first event that names
// the provider's id stops the stream until the id is recorded. A Responses id is what a
// lookup of a broken stream reads (ops rule 11: nothing is resent or failed without it), so
// its commit waits for the disk; a message id of Anthropic's, which keeps nothing to look
// up, only helps a person find the call, so the stream goes on without that wait.
func TestStreamedIDWaitsForTheDiskOnlyWhereALookupReadsIt(t *testing.T) {
	refs := durableRefs{}
	op := &ops.Operation{ID: "op-1"}
	a := &ops.Attempt{N: 1}
	for _, c := range []struct {
		api api
		ref string
	}{{responsesAPI{}, "resp_1"}, {messagesAPI{}, "msg_1"}} {
		x := &exchange{g: &Gateway{cfg: Config{Refs: refs}}, ctx: context.Background(), api: c.api}
		if !x.recordRef(op, a, c.ref) {
			t.Fatalf("%s: recordRef says there was no id", c.ref)
		}
	}
	if durable, ok := refs["resp_1"]; !ok || !durable {
		t.Errorf("the response id was recorded %v (recorded: %v); want a commit that waits for the disk", durable, ok)
	}
	if durable, ok := refs["msg_1"]; !ok || durable {
		t.Errorf("the message id was recorded durable=%v (recorded: %v); want a commit that does not wait for the disk", durable, ok)
	}
}
