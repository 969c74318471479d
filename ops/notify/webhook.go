package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/settle-dev/settle/internal/httppost"
	"github.com/settle-dev/settle/ops/outbox"
)

// Webhook posts each notification as Slack-compatible JSON ({"text": …, "blocks": […]}) to
// a URL, such as a Slack incoming webhook. The event id travels in the Settle-Event-Id
// header and in the message's last block, so a copy sent again is recognised.
type Webhook struct {
	URL        string
	Operations Operations
	Kinds      Kinds
	// Client sends the posts; nil is one with httppost.DefaultTimeout.
	Client *http.Client
}

var _ outbox.Publisher = (*Webhook)(nil)

// Publish posts e; any status other than 2xx is a failed delivery, tried again later. The
// error is stored in the notification's row and names the receiver's host only: the URL of
// a Slack incoming webhook is its secret (httppost).
func (w *Webhook) Publish(ctx context.Context, e outbox.Event) error {
	m, err := Compose(ctx, w.Operations, w.Kinds, e)
	if err != nil {
		return err
	}
	body, err := json.Marshal(slackBody(m))
	if err != nil {
		return fmt.Errorf("encode notification: %w", err)
	}
	if err := httppost.JSON(ctx, w.Client, w.URL, m.EventID, body); err != nil {
		return fmt.Errorf("post notification %s: %w", m.EventID, err)
	}
	return nil
}

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type slackBlock struct {
	Type     string      `json:"type"`
	Text     *slackText  `json:"text,omitempty"`
	Elements []slackText `json:"elements,omitempty"`
}

// slackBody is the message in Slack's shape: text for notifications and receivers that
// read no blocks, blocks for the outcome, the sentence to copy, and the ids. Every value is
// escaped (slackEscape): an order id, an email or a provider reference is chosen by a tenant,
// a person or a provider, and unescaped it could ping a channel or hide a link.
func slackBody(m Message) map[string]any {
	what, headline, sentence := slackEscape(m.What), slackEscape(m.Headline), slackEscape(m.Sentence)
	return map[string]any{
		"text": what + " has settled: " + headline + ". Send the customer now: " + sentence,
		"blocks": []slackBlock{
			{Type: "section", Text: &slackText{Type: "mrkdwn", Text: "*" + what + "* has settled: *" + headline + "*"}},
			{Type: "section", Text: &slackText{Type: "plain_text", Text: sentence}},
			{Type: "context", Elements: []slackText{{Type: "mrkdwn",
				Text: "Operation " + slackEscape(m.OperationID) + " · for " + slackEscape(m.To) + " · notification " + slackEscape(m.EventID)}}},
		},
	}
}

// slackEscaper escapes the three characters Slack reads as control characters in a
// message's text: < and > open and close a mention (<!channel>, <@U123>) or a link
// (<https://…|text>), and & starts the escapes themselves. A link Settle builds into a
// message is written around escaped values, never passed through this.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func slackEscape(s string) string { return slackEscaper.Replace(s) }
