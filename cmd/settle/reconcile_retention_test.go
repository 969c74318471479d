package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// 'settle reconcile' may run with another SETTLE_RETENTION than the replicas that removed
// history (the default 400 days on an operator's laptop, 40 days on the servers): it
// refuses a window that starts before what the retention has actually removed, as the
// database records it, since each provider record of a removed operation would be raised as
// an orphan charge (ops rule 12).
func TestReconcileRefusesAWindowTheRetentionRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, conn := connectedDatabase(t)
	removed := time.Now().Add(-40 * 24 * time.Hour)
	if _, err := conn.Exec(ctx, `INSERT INTO retention_state (name, removed_before) VALUES ('retention', $1)`, removed); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"DATABASE_URL": url, "STRIPE_API_KEY": "sk_test_x", "STRIPE_API_BASE": "http://127.0.0.1:1"}
	code, stdout, stderr := run(t, []string{"reconcile", "--since", "1200h"}, vars, "")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "removed") || !strings.Contains(stderr, removed.UTC().Format("2006-01-02")) ||
		strings.Count(stderr, "\n") != 1 {
		t.Errorf("reconcile --since 1200h after the retention removed what closed 40 days ago: exit %d, stderr %q; want 2 and one line naming the date", code, stderr)
	}
}
