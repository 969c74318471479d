package pg

import (
	"testing"
	"time"
)

// TestALeaderWhoseStatementLeftInAnotherBatchFreesItsSlot: a writer that took a leader's
// slot may find its statement already sent by the other leader, which takes every statement
// queued, its own or not. It must wait for that batch as a follower does and give the slot
// back at once: a leader that kept looping would send empty batches, burning a core of a
// small machine for a whole round trip, and hold a slot another writer could lead with.
func TestALeaderWhoseStatementLeftInAnotherBatchFreesItsSlot(t *testing.T) {
	g := &group{flushers: 2, active: 1}          // the slot queryRow took for this leader
	mine := &groupJob{done: make(chan struct{})} // already in another leader's batch
	returned := make(chan struct{})
	go func() {
		g.lead(mine)
		close(returned)
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		active := g.active
		g.mu.Unlock()
		if active == 0 {
			break
		}
		if time.Now().After(deadline) {
			close(mine.done)
			t.Fatal("the leader kept its slot, looping on an empty queue, while its statement was in another batch")
		}
	}
	select {
	case <-returned:
		t.Fatal("the leader returned before its statement's batch was done")
	default:
	}
	close(mine.done)
	<-returned
}
