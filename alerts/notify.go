package alerts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/settle-dev/settle/internal/httppost"
)

// Notifier delivers one notice to one receiver. It may be called more than once for the
// same event; eventID lets the receiver drop repeats.
type Notifier interface {
	Notify(ctx context.Context, eventID string, n Notice) error
}

// Receiver is a named destination of notifications.
type Receiver struct {
	ReceiverInfo
	Notifier Notifier
}

// Receivers builds the receivers of a configuration: Alertmanager when amURL is set, and
// one webhook per URL. Names are stable for the same URL, so outbox rows written before a
// restart still find their receiver after it.
func Receivers(amURL string, webhookURLs []string, client *http.Client, externalURL string) []Receiver {
	var out []Receiver
	if amURL != "" {
		out = append(out, Receiver{ReceiverInfo: ReceiverInfo{Name: "alertmanager", EveryEvaluation: true},
			Notifier: &Alertmanager{URL: amURL, Client: client}})
	}
	for _, u := range webhookURLs {
		sum := sha256.Sum256([]byte(u))
		name := "webhook:" + hex.EncodeToString(sum[:6])
		out = append(out, Receiver{ReceiverInfo: ReceiverInfo{Name: name},
			Notifier: &Webhook{URL: u, Client: client, Receiver: name, ExternalURL: externalURL}})
	}
	return out
}

// Infos lists what the evaluator needs to know of rs.
func Infos(rs []Receiver) []ReceiverInfo {
	out := make([]ReceiverInfo, len(rs))
	for i, r := range rs {
		out[i] = r.ReceiverInfo
	}
	return out
}

// Dispatcher delivers the rows of the alert outbox: each is one notice for the receiver it
// names. The outbox relay that calls it (wired in cmd/settle) gives it retries with backoff.
type Dispatcher struct {
	Receivers []Receiver
	Logger    *slog.Logger
}

// Deliver sends the notice in payload, the outbox row eventID, to the receiver named
// receiver. It may be called more than once for one row; receivers see its eventID.
func (d *Dispatcher) Deliver(ctx context.Context, receiver, eventID string, payload []byte) error {
	var n Notice
	if err := json.Unmarshal(payload, &n); err != nil {
		// A row nobody can read will never become readable; retrying it forever would only
		// hide it. Say so loudly and let it go.
		d.logger().Error("drop unreadable alert notification", "event", eventID, "err", err)
		return nil
	}
	for _, r := range d.Receivers {
		if r.Name == receiver {
			return r.Notifier.Notify(ctx, eventID, n)
		}
	}
	// The receiver was removed from the configuration since the row was written.
	d.logger().Warn("drop alert notification for a receiver no longer configured", "receiver", receiver, "event", eventID)
	return nil
}

func (d *Dispatcher) logger() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.Default()
}

// Alertmanager posts alerts to Alertmanager's v2 API.
type Alertmanager struct {
	// URL is Alertmanager's base URL, e.g. http://alertmanager:9093.
	URL    string
	Client *http.Client
}

// postableAlert is an alert as POST /api/v2/alerts takes it.
type postableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Notify posts n. A resolved notice carries an endsAt in the past, which is how
// Alertmanager learns an alert is over.
func (a *Alertmanager) Notify(ctx context.Context, eventID string, n Notice) error {
	body, err := json.Marshal([]postableAlert{{Labels: n.Labels, Annotations: n.Annotations, StartsAt: n.StartsAt,
		EndsAt: n.EndsAt, GeneratorURL: n.GeneratorURL}})
	if err != nil {
		return fmt.Errorf("encode alert: %w", err)
	}
	return post(ctx, a.Client, strings.TrimRight(a.URL, "/")+"/api/v2/alerts", eventID, body)
}

// Webhook posts the Alertmanager webhook payload (version 4) to a URL, one alert per
// notification, for teams without an Alertmanager.
type Webhook struct {
	URL         string
	Client      *http.Client
	Receiver    string
	ExternalURL string
}

// WebhookPayload is Alertmanager's webhook body, version 4.
type WebhookPayload struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []Notice          `json:"alerts"`
}

// Notify posts n with the event id in Settle-Event-Id so the receiver can drop repeats.
func (w *Webhook) Notify(ctx context.Context, eventID string, n Notice) error {
	p := WebhookPayload{Version: "4", GroupKey: fmt.Sprintf("{}:{alertname=%q}", n.Labels["alertname"]),
		Status: n.Status, Receiver: w.Receiver, GroupLabels: map[string]string{"alertname": n.Labels["alertname"]},
		CommonLabels: n.Labels, CommonAnnotations: n.Annotations, ExternalURL: w.ExternalURL, Alerts: []Notice{n}}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode webhook payload: %w", err)
	}
	return post(ctx, w.Client, w.URL, eventID, body)
}

// post sends one notification. Its error is stored in the alert outbox's row, so it names
// the receiver's host only: a webhook's URL may be its secret (httppost).
func post(ctx context.Context, c *http.Client, target, eventID string, body []byte) error {
	if err := httppost.JSON(ctx, c, target, eventID, body); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}
