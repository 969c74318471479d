package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/purgestore"
)

// A receiver's inbox keeps what applying each event once needs, its id, and no copy of the
// event's body: after the body purge no job result is kept anywhere (docs/security.md,
// "Bodies go when they should"), whether the receiver took the event before the purge or
// only after it. A redelivery is still applied once (ops rule 10).
func TestAReceiversInboxKeepsNoJobResultPastThePurge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	early := e.submit(t, e.tenant, "inbox-early", docA, "v1")
	e.drain(t, e.worker("w1", false))
	rcv := newReceiver(t, e.db, 0)
	clock := ops.NewManualClock(time.Now())
	relay := &outbox.Relay{Store: pg.JobOutbox{DB: e.db}, Publisher: jobs.NewWebhooks([]string{rcv.url}, nil), Clock: clock}
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("delivery before the purge: %d %v", n, err)
	}
	late := e.submit(t, e.tenant, "inbox-late", docB, "v1")
	e.drain(t, e.worker("w1", false))
	ttl := 24 * time.Hour
	p := &llm.Purger{Store: purgestore.New(e.db), Clock: ops.NewManualClock(time.Now().Add(ttl + llm.DefaultBodyKeep + time.Hour)), JobTTL: ttl}
	if rep, err := p.RunOnce(ctx); err != nil || rep.Jobs != 2 {
		t.Fatalf("purge: %+v %v, want both jobs purged", rep, err)
	}
	// The receiver was down for the second event: it takes it, whole, only now.
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("delivery after the purge: %d %v", n, err)
	}
	if _, err := p.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for _, j := range []*jobs.Job{early, late} {
		if _, applied := rcv.counts(j.ID); applied != 1 {
			t.Fatalf("job %s applied %d times, want once", j.ID, applied)
		}
		if n := e.count(t, `SELECT count(*) FROM consumed_events WHERE consumer = 'sample' AND entity_id = $1`, j.ID); n != 1 {
			t.Fatalf("job %s has %d inbox rows, want the one that keeps it applied once", j.ID, n)
		}
		if n := e.count(t, `SELECT count(*) FROM consumed_events WHERE entity_id = $1 AND payload IS NOT NULL`, j.ID); n != 0 {
			t.Errorf("the inbox keeps the body of job %s's event, its result included, past the purge", j.ID)
		}
	}
	// Delivered again (the relay died before marking them): applied no second time.
	if _, err := e.db.Pool.Exec(ctx, `UPDATE job_outbox SET published_at = NULL, locked_until = NULL`); err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("redelivery: %d %v", n, err)
	}
	for _, j := range []*jobs.Job{early, late} {
		if _, applied := rcv.counts(j.ID); applied != 1 {
			t.Fatalf("job %s applied %d times after a redelivery, want once", j.ID, applied)
		}
	}
}
