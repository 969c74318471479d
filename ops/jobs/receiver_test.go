package jobs_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
)

// receiver is the sample receiver of job.published: an HTTP endpoint on loopback that
// applies each event once through outbox.Consumer and its inbox table, writing a receipt
// row of its own in the inbox's transaction. It counts deliveries (at least once) and
// applications (once) per job.
type receiver struct {
	url string

	mu        sync.Mutex
	failFirst int
	delivered int
	applied   map[string]int
}

// receiptsTable is the sample receiver's own table: one row per application of an event.
// Nothing in it is unique, so an event applied twice shows as two rows.
const receiptsTable = `CREATE TABLE IF NOT EXISTS sample_receipts (
	event_id text NOT NULL, job_id text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`

// sampleConsumer is the sample receiver's consumer: it checks the payload and writes its
// receipt through the inbox's transaction, then calls between (a test's crash point, or nil)
// before the inbox commits.
func sampleConsumer(db *pg.DB, between func()) *outbox.Consumer {
	return &outbox.Consumer{Name: "sample", Store: db, Clock: ops.SystemClock{},
		Apply: func(ctx context.Context, tx outbox.Tx, e outbox.Event) error {
			var p struct {
				JobID  string          `json:"job_id"`
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil || p.JobID == "" || len(p.Result) == 0 {
				return ops.Errorf(ops.EINVALID, "not a job.published payload")
			}
			if _, err := tx.Exec(ctx, `INSERT INTO sample_receipts (event_id, job_id) VALUES ($1, $2)`, e.EventID, p.JobID); err != nil {
				return err
			}
			if between != nil {
				between()
			}
			return nil
		}}
}

// newReceiver starts a receiver that answers 500 to the first failFirst deliveries.
func newReceiver(t *testing.T, db *pg.DB, failFirst int) *receiver {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), receiptsTable); err != nil {
		t.Fatal(err)
	}
	r := &receiver{failFirst: failFirst, applied: map[string]int{}}
	c := sampleConsumer(db, nil)
	c.Applied = func(e outbox.Event) {
		r.mu.Lock()
		r.applied[e.EntityID]++
		r.mu.Unlock()
	}
	h := c.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		fail := r.failFirst > 0
		if fail {
			r.failFirst--
		}
		r.mu.Unlock()
		if fail {
			http.Error(w, "receiver down", http.StatusInternalServerError)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			r.mu.Lock()
			r.delivered++
			r.mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// counts returns the successful deliveries of all events and the applications of the job's.
func (r *receiver) counts(jobID string) (deliveries, applied int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.delivered, r.applied[jobID]
}
