// Package notify tells a person who follows an operation ("Tell me when this settles") how
// it ended, and the sentence to send the customer now. The store writes one row per settled
// follow-up and channel to the follow-ups' outbox in the transaction that closes the
// operation; an outbox.Relay per channel hands each row to a Publisher here (Webhook posts
// Slack-compatible JSON, Mail sends a message over SMTP), retrying with backoff until the
// receiver takes it. Delivery is at least once: a process that dies after the receiver took
// a message and before the row is marked sends it again, with the same event id.
package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/outbox"
)

// Payload is what the store writes for one settled follow-up and channel.
type Payload struct {
	EventID        string     `json:"event_id"`
	FollowUpID     int64      `json:"follow_up_id"`
	OperationID    string     `json:"operation_id"`
	Outcome        ops.Status `json:"outcome"`
	PreviousStatus ops.Status `json:"previous_status"`
	WatcherEmail   string     `json:"watcher_email"`
	SettledAt      time.Time  `json:"settled_at"`
	ClosedBy       string     `json:"closed_by"`
}

// Operations reads the operation a notification is about, for the sentence.
type Operations interface {
	Get(ctx context.Context, id string) (*ops.Operation, error)
	// MadeCharges reads what of a failed operation took money after all, so that the
	// sentence does not say nothing moved (ops rule 12).
	ops.MadeCharges
}

// Kinds says how each kind of operation is named and worded for the customer: the ledger,
// with the kinds the program registered (ops.Ledger.Kind).
type Kinds interface {
	Kind(k ops.Kind) ops.KindSpec
}

// Message is one notification in words.
type Message struct {
	EventID string
	To      string
	Subject string
	// Headline is the outcome in plain words, as /support says it.
	Headline string
	// Sentence is what support sends the customer now: the kind's one wording for the
	// outcome.
	Sentence    string
	OperationID string
	// What names the operation: "Refund of 38.00 USD, order 4520".
	What     string
	ClosedBy string
	// Text is the whole message as plain text.
	Text string
}

// Compose reads the event's payload and its operation and words the notification. The
// sentence is the one /support and the operation's page show for the outcome (its kind's
// ops.KindSpec.CustomerStatus), never a copy of it.
func Compose(ctx context.Context, reader Operations, kinds Kinds, e outbox.Event) (Message, error) {
	var p Payload
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return Message{}, fmt.Errorf("read notification %s: %w", e.EventID, err)
	}
	op, err := reader.Get(ctx, p.OperationID)
	if err != nil {
		return Message{}, fmt.Errorf("read operation %s: %w", p.OperationID, err)
	}
	spec := kinds.Kind(op.Kind)
	c, err := spec.CustomerStatusOf(ctx, reader, op)
	if err != nil {
		return Message{}, err
	}
	m := Message{EventID: p.EventID, To: p.WatcherEmail, Headline: c.Headline, Sentence: c.Sentence,
		OperationID: op.ID, What: Describe(spec, op), ClosedBy: p.ClosedBy}
	if m.EventID == "" {
		m.EventID = e.EventID
	}
	m.Subject = "Settled: " + m.What + " — " + c.Headline
	var b strings.Builder
	fmt.Fprintf(&b, "%s has settled: %s.\n\nSend the customer now:\n\n%s\n\n", m.What, c.Headline, c.Sentence)
	fmt.Fprintf(&b, "Operation %s", op.ID)
	if p.ClosedBy != "" {
		fmt.Fprintf(&b, ", closed by %s", p.ClosedBy)
	}
	fmt.Fprintf(&b, ".\nNotification %s (the same id on every copy of this message).\n", m.EventID)
	m.Text = b.String()
	return m, nil
}

// Describe names an operation of the kind spec describes the way support asks about it.
func Describe(spec ops.KindSpec, op *ops.Operation) string {
	what := spec.Name
	if op.AmountCents > 0 {
		what += " of " + ops.FormatMoney(op.AmountCents, op.Currency)
	}
	if op.OrderRef != "" {
		what += ", order " + op.OrderRef
	}
	return what
}
