package main

import (
	"context"
	"net/url"
	"time"

	"github.com/settle-dev/settle/ops/notify"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
)

// NotifyConfig is where the notifications of settled follow-ups go. A channel left unset
// keeps its rows in the follow-ups' outbox, undelivered; the dashboard shows every
// follow-up whatever is set.
type NotifyConfig struct {
	// WebhookURL is SETTLE_NOTIFY_WEBHOOK_URL: Slack-compatible JSON is posted there.
	WebhookURL string
	// SMTP is read from SETTLE_SMTP_URL; nil sends no mail.
	SMTP *notify.SMTP
}

// loadNotifyEnv reads the follow-ups' notifier settings.
func loadNotifyEnv(nc *NotifyConfig, e environ) error {
	nc.WebhookURL, nc.SMTP = e.get(envNotifyWebhookURL), nil
	if b := nc.WebhookURL; b != "" {
		if u, err := url.Parse(b); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("%s is not an http(s) URL", envNotifyWebhookURL.Name)
		}
	}
	if raw := e.get(envSMTPURL); raw != "" {
		s, err := notify.ParseSMTPURL(raw)
		if err != nil {
			// The URL may hold a password: ParseSMTPURL's errors never quote it.
			return usagef("%s must look like smtp://user:pass@host:587?from=settle@example.com (%s)", envSMTPURL.Name, err)
		}
		nc.SMTP = &s
	}
	return nil
}

// startFollowUpRelays delivers the follow-ups' notifications of each configured channel. Every
// replica runs them: a row is held by one relay at a time (see pg.FollowUpOutbox), so it is
// delivered by one replica, again only after that one's hold ran out without a mark. Each
// hold outlasts its publisher's timeout (10 s a post, 30 s a mail), so a slow receiver is
// never sent the same notification by a second replica while the first still talks to it.
func (p *Program) startFollowUpRelays(ctx context.Context, nc NotifyConfig, keep time.Duration) {
	if nc.WebhookURL != "" {
		relay := &outbox.Relay{Store: pg.FollowUpOutbox{DB: p.DB, Channel: "webhook"}, Clock: p.Clock,
			Publisher: &notify.Webhook{URL: nc.WebhookURL, Operations: p.DB, Kinds: p.Ledger}, Interval: time.Second, Hold: 30 * time.Second, Keep: keep, Logger: p.Logger}
		p.goLoop(ctx, relay.Loop("follow-up webhook relay"))
	}
	if nc.SMTP != nil {
		relay := &outbox.Relay{Store: pg.FollowUpOutbox{DB: p.DB, Channel: "email"}, Clock: p.Clock,
			Publisher: &notify.Mail{Server: *nc.SMTP, Operations: p.DB, Kinds: p.Ledger, Clock: p.Clock}, Interval: 2 * time.Second, Hold: 2 * time.Minute, Keep: keep, Logger: p.Logger}
		p.goLoop(ctx, relay.Loop("follow-up mail relay"))
	}
}
