package pg_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestACallsCloseStaysOnItsOperationsPage: an operation's close is never heap-only (status
// is indexed), but a new row version written on the old one's page costs the WAL only the
// bytes that changed, and no lock record; one that must move to another page is logged
// whole, after a lock record on the old version. An LLM call's row about doubles at its
// close (its answer, and a stream's events), so pages of operations filled to the brim at
// the openings sent every close elsewhere: this opens calls until their first page is
// full, then closes a plain and a streamed one, which must stay where they were opened
// (migration 00078).
func TestACallsCloseStaysOnItsOperationsPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	calls := f.openCallsPastAPage(t)
	for i, ev := range [][]byte{nil, pageStreamEvents()} {
		c := calls[i]
		was := f.block(t, c.Op.ID)
		f.closeCall(t, c, i, ev)
		if now := f.block(t, c.Op.ID); now != was {
			t.Errorf("a call's close (streamed: %v) moved its row from page %d to page %d", ev != nil, was, now)
		}
	}
}

// TestAPlainCallsCloseLogsOnlyWhatChanged: the WAL records a plain call's close writes on
// the operations table, read with pg_walinspect, are one update, logged in fewer bytes than
// the new row version holds (the unchanged head, its request included, is left out), and no
// lock record (migration 00078). Before, the version went to another page, whole, after a
// lock record.
func TestAPlainCallsCloseLogsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.db.Pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		t.Skipf("no pg_walinspect: %v", err)
	}
	c := f.openCallsPastAPage(t)[0]
	var rel, start, end string
	if err := f.db.Pool.QueryRow(ctx, `SELECT '/' || d.oid || '/' || pg_relation_filenode('operations') || ' ',
	pg_current_wal_insert_lsn()::text FROM pg_database d WHERE d.datname = current_database()`).Scan(&rel, &start); err != nil {
		t.Fatal(err)
	}
	f.closeCall(t, c, 0, nil)
	row := f.count(t, `SELECT pg_column_size(o.*) FROM operations o WHERE id = $1`, c.Op.ID)
	// A commit that wrote WAL and waits for its flush makes the records of the close readable.
	tx, err := f.db.Pool.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, `SET LOCAL synchronous_commit = on`)
	}
	if err == nil {
		err = tx.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text, pg_logical_emit_message(true, 'settle-test', 'flush')::text`).Scan(&end, new(string))
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	rows, err := f.db.Pool.Query(ctx, `SELECT record_type, record_length FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)
WHERE resource_manager = 'Heap' AND block_ref LIKE '%' || $3 || '%'`, start, end, rel)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var kind string
		var n int
		if err := rows.Scan(&kind, &n); err != nil {
			t.Fatal(err)
		}
		got[kind]++
		if strings.HasPrefix(kind, "UPDATE") && n >= row {
			t.Errorf("the close's update record takes %d bytes, the row version %d: it was logged whole", n, row)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["UPDATE"] != 1 {
		t.Errorf("a plain call's close wrote %v on operations, want one UPDATE and no LOCK", got)
	}
}

// block returns the page that holds operation id's row.
func (f *fixture) block(t *testing.T, id string) int {
	t.Helper()
	return f.count(t, `SELECT (ctid::text::point)[0]::int FROM operations WHERE id = $1`, id)
}

// openCallsPastAPage opens LLM calls, claimed, until the last lands on a page after the
// first one's: the first page is then as full as openings fill it.
func (f *fixture) openCallsPastAPage(t *testing.T) []ops.Admission {
	t.Helper()
	var calls []ops.Admission
	for i := 0; len(calls) < 3 || f.block(t, calls[len(calls)-1].Op.ID) == f.block(t, calls[0].Op.ID); i++ {
		c, err := f.seed().Open(context.Background(), ops.Intent{TenantID: f.tenant, Kind: ops.KindLLMCall, Provider: "openai",
			IntentKey: fmt.Sprintf("page-%d", i), Fingerprint: "fp-page", Retention: 24 * time.Hour,
			Request: []byte(`{"body":{"model":"fake-small","stream":true,"messages":[{"role":"user","content":"What is the capital of France? Answer in one short sentence."}]}}`)}, "r", "gw")
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	return calls
}

// closeCall closes c as a success with a short chat completion, and events when streamed.
func (f *fixture) closeCall(t *testing.T, c ops.Admission, i int, events []byte) {
	t.Helper()
	body := []byte(`{"id":"chatcmpl-page","object":"chat.completion","created":1765000000,"model":"fake-small","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France, and has been for a long time now."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}}`)
	if _, err := f.seed().Finish(context.Background(), c.Op, c.Attempt, "gw", ops.AttemptResult{Outcome: ops.OutcomeOK, HTTPStatus: 200,
		Result: &ops.Result{ProviderRef: fmt.Sprintf("chatcmpl-page-%d", i), Body: body, Events: events}}); err != nil {
		t.Fatal(err)
	}
}

// pageStreamEvents are a stream's stored events: 20 chunks of a chat completion.
func pageStreamEvents() []byte {
	var evs []string
	for k := range 20 {
		evs = append(evs, fmt.Sprintf(`{"id":"chatcmpl-page","object":"chat.completion.chunk","created":1765000000,"model":"fake-small","choices":[{"index":0,"delta":{"content":"word%d "},"finish_reason":null}]}`, k))
	}
	return []byte(`{"attempt":1,"events":[` + strings.Join(evs, ",") + `]}`)
}
