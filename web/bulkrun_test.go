package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/deskstore"
)

// bulkRows is more than the 200 a lookup of the whole filter used to stop at.
const bulkRows = 230

// TestLookUpAllMatchingCoversTheWholeFilter: "Look up all matching" runs over every row the
// filter matches, not the first 200, as background work: its page shows done / total while
// it runs, a second person sees it running from the queue, a runner that dies mid-way is
// taken over from where it stopped once its lease ends, and the whole run is one action in
// the audit log with its filter.
func TestLookUpAllMatchingCoversTheWholeFilter(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	refunded := map[string]bool{}
	for i := range bulkRows {
		order := fmt.Sprintf("bulk-%03d", i)
		if i%10 == 0 {
			refunded[e.refundedButUnknown(t, order).ID] = true
		} else {
			e.notSentUnknown(t, order)
		}
	}
	first := e.signIn(t, "first@example.com", desk.RoleOncall)
	second := e.signIn(t, "second@example.com", desk.RoleOncall)
	resp := e.post(t, first, "/ops/lookup", url.Values{"scope": {"filter"}, "tab": {"unknown"}, "kind": {"refund"}})
	run := bulkLocation(t, resp)

	_, page := e.page(t, first, run)
	mustContain(t, page, `data-state="running"`, `data-testid="bulk-run-total">230<`, `data-testid="bulk-run-done">0<`,
		`data-testid="bulk-run-stop"`, "unknown operations, kind refund", `hx-trigger="every 2s"`)
	_, queue := e.page(t, second, "/ops")
	mustContain(t, queue, `data-testid="bulk-running-row"`, "first@example.com is looking up unknown operations, kind refund",
		`href="`+run+`"`)

	// The first runner dies after two pages: its lease still holds the run, so nobody else
	// takes it until the lease ends; then another runner finishes it from its cursor.
	ctx, cancel := context.WithCancel(context.Background())
	dying := &desk.BulkRunner{Desk: e.desk, Queues: &dyingQueues{Queues: deskstore.New(e.world.DB), after: 2, cancel: cancel},
		Owner: "bulk:dies", PageSize: 50}
	if ran, err := dying.RunOnce(ctx); !ran || !errors.Is(err, context.Canceled) {
		t.Fatalf("the dying runner ran=%v err=%v", ran, err)
	}
	_, page = e.page(t, second, run)
	mustContain(t, page, `data-state="running"`, `data-testid="bulk-run-done">100<`, "Running: 100 of 230 looked up")
	if n := e.runBulk(t, 50); n != 0 {
		t.Fatalf("a run whose lease is live was taken over (%d)", n)
	}
	e.clock.Advance(3 * time.Minute)
	if n := e.runBulk(t, 50); n != 1 {
		t.Fatalf("%d runs taken over after the lease ended, want 1", n)
	}

	_, page = e.page(t, second, run)
	mustContain(t, page, `data-state="done"`, `data-testid="bulk-run-done">230<`,
		fmt.Sprintf(`data-testid="bulk-closed">%d<`, len(refunded)),
		fmt.Sprintf(`data-testid="bulk-need-person">%d<`, bulkRows-len(refunded)), `data-outcome="not_found"`)
	if _, queue = e.page(t, second, "/ops"); strings.Contains(queue, `data-testid="bulk-running-row"`) {
		t.Error("the queue still shows a finished run as running")
	}
	for id := range refunded {
		if op := e.get(t, id); op.Status != ops.StatusSucceeded {
			t.Errorf("refunded operation %s is %s after the run", id, op.Status)
		}
	}
	checkBulkAudit(t, e, "bulk_lookup.start", "first@example.com", "unknown operations, kind refund")
	checkBulkAudit(t, e, "bulk_lookup.done", "first@example.com", `"done": 230`)
}

// TestStopABulkLookup: anyone who may look up can stop a run; what it closed stays closed,
// no runner picks it up again, and the stop is audited with who stopped it.
func TestStopABulkLookup(t *testing.T) {
	t.Parallel()
	e := newDashEnv(t)
	for i := range 5 {
		e.notSentUnknown(t, fmt.Sprintf("stop-%d", i))
	}
	first := e.signIn(t, "first@example.com", desk.RoleOncall)
	second := e.signIn(t, "second@example.com", desk.RoleOncall)
	support := e.signIn(t, "support@example.com", desk.RoleSupport)
	run := bulkLocation(t, e.post(t, first, "/ops/lookup", url.Values{"scope": {"filter"}, "tab": {"unknown"}}))

	_, page := e.page(t, support, run)
	mustContain(t, page, `data-state="running"`)
	if strings.Contains(page, `data-testid="bulk-run-stop"`) {
		t.Error("support is offered the stop button")
	}
	if resp := e.post(t, support, run+"/stop", nil); resp.StatusCode != 403 {
		t.Errorf("support stopping a run = %d, want 403", resp.StatusCode)
	}
	if resp := e.post(t, second, run+"/stop", nil); resp.StatusCode != 303 {
		t.Fatalf("stop = %d, want 303", resp.StatusCode)
	}
	if n := e.runBulk(t, 2); n != 0 {
		t.Fatalf("a stopped run was run (%d)", n)
	}
	_, page = e.page(t, first, run)
	mustContain(t, page, `data-state="stopped"`, "Stopped by second@example.com", `data-testid="bulk-run-done">0<`)
	if strings.Contains(page, `data-testid="bulk-run-stop"`) {
		t.Error("a stopped run still offers the stop button")
	}
	if resp := e.post(t, second, run+"/stop", nil); resp.StatusCode != 409 {
		t.Errorf("stopping a stopped run = %d, want 409", resp.StatusCode)
	}
	for _, bad := range []string{"/ops/bulk/0", "/ops/bulk/x", "/ops/bulk/99999"} {
		if code, _ := e.page(t, first, bad); code != 404 {
			t.Errorf("%s = %d, want 404", bad, code)
		}
	}
	checkBulkAudit(t, e, "bulk_lookup.stop", "second@example.com", "stopped after 0 of 5")
}

// dyingQueues is the store's queue listing with a runner that dies once it has listed after
// pages: the next listing cancels the runner's context, as a SIGKILL stops its work.
type dyingQueues struct {
	desk.Queues
	after  int32
	calls  atomic.Int32
	cancel context.CancelFunc
}

func (q *dyingQueues) ListQueue(ctx context.Context, f desk.QueueFilter, now time.Time) (desk.QueuePage, error) {
	if q.calls.Add(1) > q.after {
		q.cancel()
		return desk.QueuePage{}, ctx.Err()
	}
	return q.Queues.ListQueue(ctx, f, now)
}

// checkBulkAudit: the audit log holds one action of a bulk lookup by actor whose row
// mentions want.
func checkBulkAudit(t *testing.T, e *dashEnv, action, actor, want string) {
	t.Helper()
	var n int
	err := e.world.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE entity = 'bulk_lookup'
	AND action = $1 AND actor = $2 AND (after::text LIKE '%' || $3 || '%' OR reason LIKE '%' || $3 || '%')`, action, actor, want).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d audit rows %s by %s mentioning %q, want 1", n, action, actor, want)
	}
}
