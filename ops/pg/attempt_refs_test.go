package pg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/opstest"
)

// An attempt's provider id recorded from a stream's first event waits for the disk only when
// asked to be durable: a Responses id is what a lookup reads (ops rule 11), a message id of
// a provider that keeps nothing to look up only helps a person. Measured on a durable
// cluster of its own, where each waited-for commit is one fdatasync (pg_stat_wal.wal_sync).
func TestAttemptRefWaitsForTheDiskOnlyWhenDurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, tenant := durableDB(ctx, t, "test-refs-")
	ledger := ops.NewLedger(db, ops.SystemClock{})
	ledger.Register(llm.Kind())
	seed := opstest.New(ledger, db)
	const writes = 20
	var opened []string
	for i := range 2 * writes {
		o, err := seed.Open(ctx, ops.Intent{TenantID: tenant, Kind: ops.KindLLMCall, Provider: "anthropic",
			IntentKey: fmt.Sprintf("k-%d", i), Fingerprint: "fp", Retention: 24 * time.Hour,
			Request: []byte(`{"policy":"interactive","route":"/v1/messages","stream":true,"body":{"model":"claude-haiku-4-5"}}`)},
			fmt.Sprintf("req-%d", i), "gw")
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, o.Op.ID)
	}
	syncs := func() int64 {
		t.Helper()
		var n int64
		if _, err := db.Pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if err := db.Pool.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	record := func(ids []string, durable bool) int64 {
		t.Helper()
		before := syncs()
		for _, id := range ids {
			if err := db.RecordAttemptRef(ctx, id, 1, "msg_"+id, durable); err != nil {
				t.Fatal(err)
			}
		}
		return syncs() - before
	}
	// The WAL writer flushes what waits every 200 ms on its own; the writes take far less.
	if n := record(opened[:writes], false); n > writes/4 {
		t.Errorf("%d ids recorded without durability waited for %d flushes, want them not to wait", writes, n)
	}
	if n := record(opened[writes:], true); n < writes {
		t.Errorf("%d ids recorded durably waited for %d flushes, want one each", writes, n)
	}
	refs, err := db.AttemptRefs(ctx, opened[0])
	if err != nil || refs[1] != "msg_"+opened[0] {
		t.Fatalf("the attempt's refs %v (%v), want msg_%s", refs, err, opened[0])
	}
}
