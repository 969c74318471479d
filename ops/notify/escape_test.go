package notify_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/notify"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
)

// TestHostileValuesAreEscapedInTheSlackMessage: a tenant chooses its order ids and an
// identity provider its people's emails, and both reach the webhook's message. Slack reads
// <…> as a mention (<!channel> pings everyone) or a link whose text hides its target
// (<https://evil.example|your refund>), and & as the start of an entity; so every value is
// posted with &, < and > escaped, and reads in Slack as it was written.
func TestHostileValuesAreEscapedInTheSlackMessage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	order := "<!channel> <https://evil.example/login|click to confirm your refund> & <@U024BE7LH>"
	email := "<!here>&lt;@example.com"
	op := w.unknownRefund(t, order)
	w.follow(t, email, op)
	hook, hookURL := newHookServer(t)
	hook.refused = 1 // this receiver takes every post
	w.clock.Advance(time.Minute)
	w.closeFound(t, op, "re_<!everyone>")
	relay := &outbox.Relay{Store: pg.FollowUpOutbox{DB: w.db, Channel: "webhook"}, Clock: w.clock,
		Publisher: &notify.Webhook{URL: hookURL, Operations: w.db, Kinds: w.ledger}}
	if _, err := relay.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	posts := hook.posts()
	if len(posts) != 1 {
		t.Fatalf("%d posts, want 1", len(posts))
	}
	texts := slackTexts(posts[0].Body)
	all := strings.Join(texts, "\n")
	if !strings.Contains(all, "&lt;!channel&gt; &lt;https://evil.example/login|click to confirm your refund&gt; &amp; &lt;@U024BE7LH&gt;") {
		t.Errorf("the order id is not in the message, escaped: %q", all)
	}
	if !strings.Contains(all, "&lt;!here&gt;&amp;lt;@example.com") {
		t.Errorf("the follower's email is not in the message, escaped: %q", all)
	}
	// Settle builds no link or mention of its own into this message, so no < or > is left,
	// and every & starts one of the three escapes.
	loneAmp := regexp.MustCompile(`&(amp|lt|gt);|&`)
	for _, s := range texts {
		if strings.ContainsAny(s, "<>") {
			t.Errorf("a text of the message holds a raw < or >: %q", s)
		}
		for _, m := range loneAmp.FindAllString(s, -1) {
			if m == "&" {
				t.Errorf("a text of the message holds a raw &: %q", s)
				break
			}
		}
	}
}

// slackTexts lists every text of a Slack message: its text, and its blocks' texts and
// elements' texts.
func slackTexts(body map[string]any) []string {
	var out []string
	if s, ok := body["text"].(string); ok {
		out = append(out, s)
	}
	blocks, _ := body["blocks"].([]any)
	for _, b := range blocks {
		block, _ := b.(map[string]any)
		if text, ok := block["text"].(map[string]any); ok {
			s, _ := text["text"].(string)
			out = append(out, s)
		}
		elements, _ := block["elements"].([]any)
		for _, e := range elements {
			el, _ := e.(map[string]any)
			s, _ := el["text"].(string)
			out = append(out, s)
		}
	}
	return out
}
