package pg_test

import (
	"context"
	"testing"
)

// Migration 00082 lets a client request be answered as a cancel (ops rule 8 records a
// client's cancel of its background response, on the operation it names, as neither a new
// intent nor a duplicate). Each cancel answer is accepted beside the old ones; the Down
// says of them what the old answers can (a refused cancel is a refused request, the others
// unanswered), and the Up takes them again.
func TestTheCancelAnswersMigrationGoesBothWays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	op := f.lifecycle(t, "ord-cancel-1")
	insert := func(answer string) error {
		_, err := f.db.Pool.Exec(ctx, `INSERT INTO client_requests (tenant_id, operation_id, kind, answer, received_at, answered_at)
VALUES ($1, $2, 'llm_call', $3, now(), now())`, f.tenant, op.ID, answer)
		return err
	}
	cancels := []string{"cancelled", "cancel_too_late", "cancel_failed", "cancel_refused"}
	for _, a := range cancels {
		if err := insert(a); err != nil {
			t.Fatalf("a cancel answered %s: %v", a, err)
		}
	}
	if err := insert("cancel_maybe"); err == nil {
		t.Fatal("an answer nobody gives was recorded")
	}
	if err := f.db.MigrateDownTo(ctx, 81); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE answer LIKE 'cancel%'`); n != 0 {
		t.Fatalf("after Down %d requests keep a cancel answer", n)
	}
	if n := f.count(t, `SELECT count(*) FROM client_requests WHERE operation_id = $1 AND answer = 'rejected'`, op.ID); n != 1 {
		t.Fatalf("after Down %d refused requests, want the refused cancel's 1", n)
	}
	if err := insert("cancelled"); err == nil {
		t.Fatal("after Down a cancel answer was recorded")
	}
	if err := f.db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := insert("cancelled"); err != nil {
		t.Fatalf("after Up again: %v", err)
	}
}
