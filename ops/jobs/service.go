package jobs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/outbox"
)

// Webhooks delivers each event to every URL. An event fails when any receiver fails, and is
// then delivered to all of them again: receivers apply events once by their id.
type Webhooks []*outbox.Webhook

// NewWebhooks returns a publisher to the given URLs.
func NewWebhooks(urls []string, client *http.Client) Webhooks {
	var w Webhooks
	for _, u := range urls {
		w = append(w, &outbox.Webhook{URL: u, Client: client})
	}
	return w
}

// Publish implements outbox.Publisher.
func (w Webhooks) Publish(ctx context.Context, e outbox.Event) error {
	var errs []error
	for _, p := range w {
		if err := p.Publish(ctx, e); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("publish %s: %w", e.Topic, err)
	}
	return nil
}

// Pool runs job workers and the relay of job events together until ctx ends.
type Pool struct {
	Workers []*Worker
	// Relay delivers job.published events; nil delivers none, and events are written only
	// while a receiver of job events is registered (job_event_consumers), so with no relay
	// and no receiver nothing waits in the jobs' outbox.
	Relay *outbox.Relay
	// Gate, when set, holds back every worker's claim of a job while it is shut: serve's
	// clock skew guard, so that a replica whose clock is off the database's claims no job
	// whose lease is live. A job in hand is finished, its lease renewed.
	Gate ops.Gate
	wg   sync.WaitGroup
}

// Start starts everything in the background; Wait waits for it after ctx ended.
func (p *Pool) Start(ctx context.Context) {
	for _, w := range p.Workers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.gated(w.Loop()).Run(ctx)
		}()
	}
	if p.Relay != nil {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.gated(p.Relay.Loop("job events relay")).Run(ctx)
		}()
	}
}

// gated is l held back by the pool's gate, if it has one.
func (p *Pool) gated(l *ops.Loop) *ops.Loop {
	if p.Gate != nil {
		l.Gated(p.Gate)
	}
	return l
}

// Wait blocks until every worker finished its job in hand and the relay stopped.
func (p *Pool) Wait() { p.wg.Wait() }

// DefaultLease is the job lease when none is configured: long enough for a database hiccup,
// short enough that a dead worker's job moves on within a minute.
const DefaultLease = 30 * time.Second
