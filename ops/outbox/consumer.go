package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/settle-dev/settle/ops"
)

// This file is the receiving half of ops rule 10: the outbox delivers each event at least
// once, so a receiver keeps an inbox of the event ids it applied and applies each one once.

// InboxStore records the events a consumer applied.
type InboxStore interface {
	// ApplyOnce records e's id for consumer and runs apply in the same transaction, which it
	// hands to apply: the receiver's own writes commit with the inbox row or not at all. The
	// row keeps no copy of e's payload, which may carry a body the purge must remove.
	// When the event was recorded already, apply is not run and applied is false. An error
	// from apply rolls both back, so the redelivery applies the event again.
	ApplyOnce(ctx context.Context, consumer string, e Event, at time.Time, apply func(ctx context.Context, tx Tx) error) (applied bool, err error)
}

// Tx is the inbox's open transaction as a receiver sees it. A receiver that writes through
// it cannot apply an event twice or lose it: a process that dies between its own write and
// the inbox row's commit leaves neither, and the redelivery applies the event whole. A
// write made anywhere else (another connection, a file, a call) commits on its own and can
// be repeated by a redelivery.
type Tx interface {
	// Exec runs one statement and returns how many rows it changed.
	Exec(ctx context.Context, sql string, args ...any) (rowsAffected int64, err error)
	// QueryRow runs a query that returns at most one row; Scan reports no row as an error.
	QueryRow(ctx context.Context, sql string, args ...any) Row
}

// Row is one row of Tx.QueryRow.
type Row interface {
	Scan(dest ...any) error
}

// Consumer applies events once per event id. Use Handle from code, or Handler as the
// endpoint a Webhook posts to.
type Consumer struct {
	// Name scopes the inbox: two consumers of one event each apply it once.
	Name  string
	Store InboxStore
	Clock ops.Clock
	// Apply applies one event. It runs inside the inbox's transaction, tx, and writes the
	// receiver's own rows through it so that they commit with the inbox row; when it fails
	// neither is recorded and the event's next delivery is applied again.
	Apply func(ctx context.Context, tx Tx, e Event) error
	// Applied, when set, is called after the inbox committed a first application: the place
	// for in-memory effects that must happen once.
	Applied func(e Event)
}

// Handle applies e unless this consumer applied it already, and says whether it did now.
func (c *Consumer) Handle(ctx context.Context, e Event) (bool, error) {
	if e.EventID == "" {
		return false, ops.Errorf(ops.EINVALID, "An event needs an id.")
	}
	clock := c.Clock
	if clock == nil {
		clock = ops.SystemClock{}
	}
	applied, err := c.Store.ApplyOnce(ctx, c.Name, e, clock.Now(), func(ctx context.Context, tx Tx) error {
		if c.Apply == nil {
			return nil
		}
		return c.Apply(ctx, tx, e)
	})
	if err != nil {
		return false, fmt.Errorf("apply event %s: %w", e.EventID, err)
	}
	if applied && c.Applied != nil {
		c.Applied(e)
	}
	return applied, nil
}

// deliveredEvent is the JSON body a Webhook posts.
type deliveredEvent struct {
	EventID   string          `json:"event_id"`
	Topic     string          `json:"topic"`
	EntityID  string          `json:"entity_id"`
	CreatedAt time.Time       `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

// Handler receives events posted by a Webhook. It answers 200 for an event applied
// now or before (so the sender stops), 400 for a body that is not an event, and 500 when
// applying failed (so the sender delivers it again).
func (c *Consumer) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d deliveredEvent
		err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&d)
		if err == nil && d.EventID == "" {
			d.EventID = r.Header.Get("Settle-Event-Id")
		}
		if err != nil || d.EventID == "" {
			http.Error(w, "not an event", http.StatusBadRequest)
			return
		}
		applied, err := c.Handle(r.Context(), Event{EventID: d.EventID, Topic: d.Topic, EntityID: d.EntityID, Payload: d.Data, CreatedAt: d.CreatedAt})
		var e *ops.Error
		if errors.As(err, &e) && e.Code == ops.EINVALID {
			http.Error(w, e.Message, http.StatusBadRequest)
			return
		}
		if err != nil {
			http.Error(w, "could not apply the event", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"applied\":%t}\n", applied)
	})
}
