package desk_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/settle-dev/settle/ops"
)

// TestClientRetriesDoNotStopAnApproval: a refund whose outcome is unknown has a proposal to
// close it (ops rule 13); its client keeps retrying the intent while the second person
// approves. The retries are answered from the operation (checking while it is open, its
// result once closed), send nothing, and do not change what the approver saw, so the
// approval closes the operation once (ops rules 5 and 6).
func TestClientRetriesDoNotStopAnApproval(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	d := f.approvalDesk(ops.ApprovalPolicy{MinCents: cents(3800)})
	op := f.toUnknown(t, "r-1")
	if out, err := f.closeByHand(t, d, op, "alice@example.com"); err != nil || out.Proposal == nil {
		t.Fatalf("proposal: %+v %v", out, err)
	}
	const n = 6
	verdicts := make([]ops.Verdict, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := f.refund("r-1", 3800)
			in.RequestRef = fmt.Sprintf("retry-%d", i)
			<-start
			var a ops.Admission
			a, errs[i] = f.ledger.Admit(ctx, in)
			verdicts[i] = a.Verdict
		}()
	}
	dec := f.decision(t, d, op, "bob@example.com")
	close(start)
	_, aerr := d.Approve(ctx, dec)
	wg.Wait()
	if aerr != nil {
		t.Fatalf("approval while the client retries: %v", aerr)
	}
	for i := range n {
		if errs[i] != nil || (verdicts[i] != ops.VerdictChecking && verdicts[i] != ops.VerdictReplay) {
			t.Errorf("retry %d: %s (%v)", i, verdicts[i], errs[i])
		}
	}
	if cur, _ := f.db.Get(ctx, op.ID); cur.Status != ops.StatusSucceeded {
		t.Fatalf("after the approval the operation is %s", cur.Status)
	}
	if got := f.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1`, op.ID); got != 1 {
		t.Fatalf("%d attempts, want the first one only", got)
	}
	if got := f.count(t, `SELECT count(*) FROM operations`); got != 1 {
		t.Fatalf("%d operations, want 1", got)
	}
}
