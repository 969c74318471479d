// Package outbox delivers the events of the transactional outbox (ops rule 10) and
// receives them: a Relay claims the rows the store wrote in the same transaction as the
// change they report and hands them to a Publisher (a Webhook posts them), at least once;
// a Consumer on the other side keeps an inbox of event ids and applies each event once.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/settle-dev/settle/internal/httppost"
	"github.com/settle-dev/settle/ops"
)

// Event is one row of the transactional outbox (ops rule 10): written in the same transaction
// as the change it reports, delivered at least once, with an id receivers use to apply it
// once.
type Event struct {
	ID        int64
	EventID   string
	Topic     string
	EntityID  string
	Payload   json.RawMessage
	CreatedAt time.Time
	Attempts  int
}

// Publisher delivers one event. It may be called more than once for the same event.
type Publisher interface {
	Publish(ctx context.Context, e Event) error
}

// Store is what the relay needs from the table of outbox rows.
type Store interface {
	// ClaimEvents holds up to limit undelivered events until holdUntil, oldest first,
	// skipping those another relay holds.
	ClaimEvents(ctx context.Context, now, holdUntil time.Time, limit int) ([]Event, error)
	// MarkPublished records events as delivered.
	MarkPublished(ctx context.Context, ids []int64, at time.Time) error
	// MarkFailed records a failed delivery; the event is tried again after retryAt.
	MarkFailed(ctx context.Context, id int64, retryAt time.Time, reason string) error
}

// Relay moves events from the outbox to a publisher. Several relays may run at once; each
// event is held by one of them while it is delivered.
type Relay struct {
	Store     Store
	Publisher Publisher
	Clock     ops.Clock
	Interval  time.Duration
	Hold      time.Duration
	Batch     int
	// Keep is how long a delivered event stays, when Store is a Pruner; default
	// DefaultKeep. Pruning runs at most once an hour.
	Keep   time.Duration
	Logger *slog.Logger

	lastPrune time.Time
}

// Pruner is a Store that can delete the events it delivered long ago.
type Pruner interface {
	PruneEvents(ctx context.Context, publishedBefore time.Time) (int64, error)
}

// DefaultKeep keeps delivered events for a week: long enough to answer "was it
// sent, and when?" about last week's incident; receivers drop repeats by event id, so
// nothing depends on the rows after that.
const DefaultKeep = 7 * 24 * time.Hour

// Loop is the relay's background loop, named name in the log ("outbox relay"): a batch
// every Interval. Every replica may run one: each event is held by one relay at a time.
func (r *Relay) Loop(name string) *ops.Loop {
	return ops.NewLoop(r.Logger, name, r.Interval, func(ctx context.Context, _ *slog.Logger) (bool, error) {
		_, err := r.RunOnce(ctx)
		return false, err
	})
}

// RunOnce delivers one batch and returns how many events were published.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	hold, batch := r.Hold, r.Batch
	if hold <= 0 {
		hold = 30 * time.Second
	}
	if batch <= 0 {
		batch = 100
	}
	now := r.Clock.Now()
	events, err := r.Store.ClaimEvents(ctx, now, now.Add(hold), batch)
	if err != nil {
		return 0, fmt.Errorf("claim events: %w", err)
	}
	var done []int64
	for _, e := range events {
		if err := r.Publisher.Publish(ctx, e); err != nil {
			backoff := min(time.Duration(1<<min(e.Attempts, 10))*time.Second, 10*time.Minute)
			if mErr := r.Store.MarkFailed(ctx, e.ID, r.Clock.Now().Add(backoff), err.Error()); mErr != nil {
				return len(done), fmt.Errorf("mark event %s failed: %w", e.EventID, mErr)
			}
			continue
		}
		done = append(done, e.ID)
	}
	if len(done) > 0 {
		if err := r.Store.MarkPublished(ctx, done, r.Clock.Now()); err != nil {
			return 0, fmt.Errorf("mark published: %w", err)
		}
	}
	r.prune(ctx, now)
	return len(done), nil
}

// prune deletes long-delivered events once an hour. It is housekeeping: a failure is
// logged and tried again an hour later.
func (r *Relay) prune(ctx context.Context, now time.Time) {
	p, ok := r.Store.(Pruner)
	if !ok || now.Sub(r.lastPrune) < time.Hour {
		return
	}
	r.lastPrune = now
	keep := r.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	n, err := p.PruneEvents(ctx, now.Add(-keep))
	if err != nil {
		r.logger().Warn("prune the outbox", "err", err)
		return
	}
	if n > 0 {
		r.logger().Info("pruned delivered events", "deleted", n, "delivered_before", now.Add(-keep))
	}
}

// logger is Logger, given when the relay is built; without one (a test that calls
// RunOnce) it logs nothing, never to the process's global logger.
func (r *Relay) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Webhook posts each event as JSON to a URL, with its id in the Settle-Event-Id
// header so the receiver can drop repeats.
type Webhook struct {
	URL string
	// Client sends the posts; nil is one with httppost.DefaultTimeout.
	Client *http.Client
}

// Publish posts e and treats any status other than 2xx as a failed delivery. Its error is
// stored in the event's row, so it names the receiver's host, never its URL (httppost).
func (w *Webhook) Publish(ctx context.Context, e Event) error {
	body, err := json.Marshal(map[string]any{"event_id": e.EventID, "topic": e.Topic, "entity_id": e.EntityID,
		"created_at": e.CreatedAt, "data": e.Payload})
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	if err := httppost.JSON(ctx, w.Client, w.URL, e.EventID, body); err != nil {
		return fmt.Errorf("deliver event %s: %w", e.EventID, err)
	}
	return nil
}
