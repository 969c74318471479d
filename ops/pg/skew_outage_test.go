package pg_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

// A replica whose skew guard is shut refuses every request, and records it (ops rule 8). When
// the database cannot be reached to record it either, the request is answered as that outage,
// as every refusal Settle could not record is (Ledger.Refuse): its client tries again and is
// counted then, rather than told only of a clock it cannot fix while its request goes
// uncounted.
func TestASkewRefusalTheDatabaseCouldNotRecordIsAnsweredAsTheOutage(t *testing.T) {
	t.Parallel()
	db, relay := pgtest.OpenBehindRelay(t)
	ctx := context.Background()
	tn, err := db.EnsureTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	ahead := ops.NewManualClock(time.Now().Add(time.Hour))
	ledger := ops.NewLedger(db, ahead)
	ledger.Register(refund.Kind())
	guard := ops.NewSkewGuard(db, ahead, time.Minute, slog.New(slog.DiscardHandler))
	if err := guard.Check(ctx); !errors.Is(err, ops.ErrClockSkew) {
		t.Fatalf("check of a clock an hour ahead: %v, want a clock skew", err)
	}
	ledger.Gate = guard
	relay.Off()
	in := ops.Intent{TenantID: tn.ID, Kind: ops.KindRefund, Provider: "stripe", IntentKey: "o1|100|usd", Fingerprint: "fp",
		AmountCents: 100, Currency: "usd", Retention: 24 * time.Hour, Owner: "w1", RequestRef: "skew-down"}
	_, err = ledger.Admit(ctx, in)
	wantUnreachable(t, "refusal of a skewed replica", err)
}
