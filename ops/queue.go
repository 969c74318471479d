package ops

import (
	"context"
	"time"
)

// QueueFilter narrows the operator queues.
type QueueFilter struct {
	Status   Status // one of the open statuses: the tab
	TenantID int64
	Kind     Kind
	Provider string
	// OlderThan keeps operations created at least this long before Now.
	OlderThan time.Duration
	Now       time.Time
	// Search matches an order, customer or chat reference, an operation id or a provider key.
	Search string
	// After is the keyset cursor: the last row of the previous page.
	After *QueueCursor
	Limit int
}

// QueueCursor is the position of one row in a queue sorted oldest first.
type QueueCursor struct {
	CreatedAt time.Time
	ID        string
}

// QueuePage is one page of a queue.
type QueuePage struct {
	Ops  []*Operation
	Next *QueueCursor
}

// Queues reads the operator queues. Counts come from a maintained source, never a scan.
type Queues interface {
	QueueCounts(ctx context.Context, f QueueFilter) (map[Status]int64, error)
	ListQueue(ctx context.Context, f QueueFilter, now time.Time) (QueuePage, error)
}
