package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"
)

// webhookAttempts and webhookBackoff bound automatic delivery. Stripe retries for days;
// a fake only needs to ride out a receiver that is starting up.
const (
	webhookAttempts = 5
	webhookBackoff  = 200 * time.Millisecond
)

// Event is one event the fake emitted and what happened to its delivery.
type Event struct {
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Created time.Time `json:"created"`
	// Payload is the exact body POSTed to the webhook URL: a Stripe Event object.
	Payload   json.RawMessage `json:"payload"`
	Attempts  int             `json:"attempts"`
	Delivered bool            `json:"delivered"`
	LastError string          `json:"last_error,omitempty"`
}

type eventRecord struct {
	Event
	// account is the connected account the event happened in, "" for the platform.
	account string
}

// newEventLocked records an event of account ("" for the platform). Its payload is
// rendered now, under the lock, so it shows the object as it was when the event happened,
// as Stripe's events do; a connected account's event names the account, as Connect
// webhooks do.
func (s *Stripe) newEventLocked(account, typ string, object obj, previous obj, requestID, idemKey string) *eventRecord {
	now := s.clock()
	id := newID("evt_")
	data := obj{"object": object}
	if previous != nil {
		data["previous_attributes"] = previous
	}
	var request any
	if requestID != "" {
		request = obj{"id": requestID, "idempotency_key": nullable(idemKey)}
	}
	pending := 0
	if s.hookURL() != "" {
		pending = 1
	}
	body := obj{
		"id":               id,
		"object":           "event",
		"api_version":      stripe.APIVersion,
		"created":          now.Unix(),
		"data":             data,
		"livemode":         false,
		"pending_webhooks": pending,
		"request":          request,
		"type":             typ,
	}
	if account != "" {
		body["account"] = account
	}
	payload, err := json.Marshal(body)
	if err != nil {
		panic("fake stripe: encoding event: " + err.Error())
	}
	ev := &eventRecord{Event: Event{ID: id, Type: typ, Created: now, Payload: payload}, account: account}
	s.events = append(s.events, ev)
	s.eventBy[id] = ev
	return ev
}

// Events returns every event emitted so far, oldest first, with delivery state.
func (s *Stripe) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Event, len(s.events))
	for i, ev := range s.events {
		out[i] = ev.Event
		out[i].Payload = append(json.RawMessage(nil), ev.Payload...)
	}
	return out
}

// ResendEvent delivers an event once more, synchronously, like the Dashboard's resend
// button; receivers must apply it only once. It returns the delivery error, if any.
func (s *Stripe) ResendEvent(id string) error {
	if s.hookURL() == "" {
		return errors.New("fake stripe: resend: no webhook URL configured")
	}
	s.mu.Lock()
	ev, ok := s.eventBy[id]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("fake stripe: resend event %s: %w", id, ErrNotFound)
	}
	err := s.deliverOnce(s.bg, ev)
	if err != nil {
		return fmt.Errorf("fake stripe: resend event %s: %w", id, err)
	}
	return nil
}

// deliverAsync sends the event in the background with a few retries. Close cancels and
// waits for it.
func (s *Stripe) deliverAsync(ev *eventRecord) {
	if s.hookURL() == "" {
		return
	}
	s.srvMu.Lock()
	if s.closed {
		s.srvMu.Unlock()
		return
	}
	s.wg.Add(1)
	s.srvMu.Unlock()
	go func() {
		defer s.wg.Done()
		wait := webhookBackoff
		for attempt := 1; attempt <= webhookAttempts; attempt++ {
			err := s.deliverOnce(s.bg, ev)
			if err == nil || s.bg.Err() != nil {
				return
			}
			s.log.Warn("fake stripe: webhook delivery failed", "event", ev.ID, "type", ev.Type,
				"attempt", attempt, "err", err)
			if attempt == webhookAttempts {
				return
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-s.bg.Done():
				t.Stop()
				return
			}
			wait *= 2
		}
	}()
}

// deliverOnce POSTs the event with a fresh signature. The signature timestamp is the wall
// clock, not the injected one: receivers check it against their own clock.
func (s *Stripe) deliverOnce(ctx context.Context, ev *eventRecord) error {
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload:   ev.Payload,
		Secret:    s.webhookSecret,
		Timestamp: time.Now(),
	})
	err := s.post(ctx, ev.Payload, signed.Header)
	s.mu.Lock()
	ev.Attempts++
	if err == nil {
		ev.Delivered = true
		ev.LastError = ""
	} else {
		ev.LastError = err.Error()
	}
	s.mu.Unlock()
	return err
}

func (s *Stripe) post(ctx context.Context, payload []byte, signature string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.hookURL(), bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", signature)
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	resp, err := s.webhookClient.Do(req)
	if err != nil {
		return fmt.Errorf("webhook post: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook post: receiver answered %s", resp.Status)
	}
	return nil
}
