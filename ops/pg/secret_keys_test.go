package pg_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestSecretKeyIsSharedAndKept: servers that ask for a key at the same moment all get the
// one the first created, it is the same the next time, and another name has its own.
func TestSecretKeyIsSharedAndKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := db.SecretKey(ctx, "sso_flow", 32, now)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	again, err := db.SecretKey(ctx, "sso_flow", 32, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if len(k) != 32 || !bytes.Equal(k, again) {
			t.Fatalf("server %d got %x, later %x", i, k, again)
		}
	}
	other, err := db.SecretKey(ctx, "other", 32, now)
	if err != nil || bytes.Equal(other, again) || len(other) != 32 {
		t.Fatalf("another name's key %x (%v), the first %x", other, err, again)
	}
	if _, err := db.SecretKey(ctx, "sso_flow", 16, now); err == nil {
		t.Fatal("a key of another size was read as it")
	}
}
