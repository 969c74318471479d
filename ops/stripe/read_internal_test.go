package stripe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// A lookup whose own deadline has run out, or that was cancelled, is not a refusal of the
// read caps: its answer says the call's time ran out and the caps' refusal counts stay
// where they were, so the counts that size the caps are not inflated by slow callers
// (ops rule 12: no answer says more than Settle knows). A wait the caps really refuse is
// still told and counted as theirs.
func TestAReadWhoseCallEndedIsNotBlamedOnTheCaps(t *testing.T) {
	a := New(Config{ReadsPerSecond: 2, TenantReadsPerSecond: 1})
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cancelled, stop := context.WithCancel(context.Background())
	stop()
	for name, ctx := range map[string]context.Context{"expired": expired, "cancelled": cancelled} {
		err := a.read(ctx, 7)
		if err == nil {
			t.Fatalf("%s: a read on an ended call went ahead", name)
		}
		if msg := ops.ErrorMessage(err); strings.Contains(msg, "Too many") || strings.Contains(msg, "at its limit") {
			t.Errorf("%s: the answer blames the caps: %q", name, msg)
		}
	}
	if s := a.ReadStats(); s.RefusedTenant != 0 || s.RefusedAccount != 0 || s.Reads != 0 {
		t.Fatalf("ended calls counted as %+v, want nothing", s)
	}
	// The tenant's burst of two is spent; a third read within 100 ms would wait a second.
	for range 2 {
		if err := a.read(context.Background(), 7); err != nil {
			t.Fatal(err)
		}
	}
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	err := a.read(short, 7)
	if msg := ops.ErrorMessage(err); !strings.Contains(msg, "Too many Stripe reads") {
		t.Fatalf("a wait the tenant's cap refuses answered %v", err)
	}
	if s := a.ReadStats(); s.RefusedTenant != 1 || s.Reads != 2 {
		t.Fatalf("after one refusal the counts are %+v, want 2 reads and 1 tenant refusal", s)
	}
}
