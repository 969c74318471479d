package pg_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/refund"
)

// A client's retry can reach a replica whose clock runs a lease ahead before the load
// balancer has taken it out: to that replica the first request's live lease looks run out,
// and admitting the retry would take the operation over and send it again while the first
// send may be under way (ops rule 11). A replica whose skew guard is shut admits nothing:
// the retry is refused as unavailable, recorded (ops rule 8), and the operation is left to
// its holder.
func TestASkewedReplicaAdmitsNoRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lease := f.ledger.Limits.Lease
	f.clock.Set(serverNow(t, f.db))
	in := f.refund("skew-retry", 900)
	first, err := f.ledger.Admit(ctx, request(in, "req-first", "worker-a"))
	if err != nil || first.Verdict != ops.VerdictSend {
		t.Fatalf("first admission: %v %v", first.Verdict, err)
	}

	skewed := ops.NewManualClock(serverNow(t, f.db).Add(lease + time.Minute))
	other := ops.NewLedger(f.db, skewed)
	other.Register(refund.Kind(), llm.Kind(), jobs.Kind(false))
	guard := ops.NewSkewGuard(f.db, skewed, ops.SkewLimit(lease), slog.New(slog.DiscardHandler))
	if err := guard.Check(ctx); !errors.Is(err, ops.ErrClockSkew) {
		t.Fatalf("check of a clock %s ahead: %v, want a clock skew", lease+time.Minute, err)
	}
	other.Gate = guard
	retry, err := other.Admit(ctx, request(in, "req-retry", "worker-b"))
	if ops.ErrorCode(err) != ops.EUNAVAILABLE || ops.ErrorReason(err) != ops.ReasonClockSkew {
		t.Fatalf("retry on the skewed replica: verdict %v, error %v; want unavailable (%s)", retry.Verdict, err, ops.ReasonClockSkew)
	}
	if got, _ := f.db.Get(ctx, first.Op.ID); got.Version != first.Op.Version || got.LeaseOwner != "worker-a" {
		t.Fatalf("the live operation was taken over: version %d owner %q", got.Version, got.LeaseOwner)
	}
	if n := f.count(t, `SELECT count(*) FROM attempts WHERE operation_id = $1`, first.Op.ID); n != 1 {
		t.Fatalf("%d attempts, want the first request's only", n)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE request_ref = 'req-retry' AND answer = 'rejected'`); n != 1 {
		t.Fatalf("the refused retry is recorded %d times, want once", n)
	}

	// Back in step, the same replica answers the retry as any other: the first request
	// still holds the operation.
	skewed.Set(serverNow(t, f.db))
	if err := guard.Check(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := other.Admit(ctx, request(in, "req-retry-2", "worker-b"))
	if err != nil || again.Verdict != ops.VerdictInFlight {
		t.Fatalf("retry back in step: %v %v, want in flight", again.Verdict, err)
	}
}
