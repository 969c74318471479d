package notify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/pg/accountstore"
)

// TestADisabledFollowerGetsNothing: once an admin disables a person, the operations they
// follow that settle send them no mail and post no webhook message about them, whether the
// operation closed after the disable or closed before it with the notification still
// waiting in the outbox; the rows say why they were not sent. Someone else following the
// same operation is still told. Enabling the person again resumes their follows: the next
// operation of theirs to settle is sent.
func TestADisabledFollowerGetsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	a, b, c := w.unknownRefund(t, "4530"), w.unknownRefund(t, "4531"), w.unknownRefund(t, "4532")
	w.follow(t, "sam@example.com", a, b, c)
	w.follow(t, "kim@example.com", a)
	hook, hookURL := newHookServer(t)
	hook.refused = 1 // this receiver takes every post
	box := startMailbox(t)
	box.refused = 1 // and this one every recipient
	relays := w.relays(hookURL, box)
	var sam int64
	if err := w.db.Pool.QueryRow(ctx, `SELECT id FROM users WHERE email = 'sam@example.com'`).Scan(&sam); err != nil {
		t.Fatal(err)
	}

	// c settles while sam is still enabled, and sam is disabled before its notifications
	// leave; a settles after the disable.
	w.clock.Advance(time.Minute)
	c = w.closeFound(t, c, "re_4532")
	if err := accountstore.New(w.db).SetUserDisabled(ctx, sam, true, "admin@example.com", w.clock.Now()); err != nil {
		t.Fatal(err)
	}
	a = w.closeFound(t, a, "re_4530")
	runAll(t, relays)
	w.clock.Advance(time.Hour)
	runAll(t, relays)

	for _, m := range box.received() {
		if m.To == "sam@example.com" {
			t.Fatalf("a disabled follower was mailed: %s", m.Data)
		}
	}
	for _, p := range hook.posts() {
		if strings.Contains(fmt.Sprint(p.Body), "sam@example.com") {
			t.Fatalf("a webhook message named a disabled follower: %v", p.Body)
		}
	}
	if len(box.received()) != 1 || box.received()[0].To != "kim@example.com" || len(hook.posts()) != 1 {
		t.Fatalf("%d messages and %d posts, want kim's one of each", len(box.received()), len(hook.posts()))
	}
	for _, op := range []*ops.Operation{a, c} {
		ds, err := w.db.FollowUpDeliveries(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.PublishedAt == nil {
				t.Fatalf("%s notification %s still waits to be sent to a disabled follower", d.Channel, d.EventID)
			}
			if d.Attempts == 0 && !strings.Contains(d.LastError, "disabled") {
				t.Fatalf("%s notification %s was neither sent nor says why not: %q", d.Channel, d.EventID, d.LastError)
			}
		}
	}

	if err := accountstore.New(w.db).SetUserDisabled(ctx, sam, false, "admin@example.com", w.clock.Now()); err != nil {
		t.Fatal(err)
	}
	w.closeFound(t, b, "re_4531")
	runAll(t, relays)
	var toSam []string
	for _, m := range box.received() {
		if m.To == "sam@example.com" {
			toSam = append(toSam, string(m.Data))
		}
	}
	if len(toSam) != 1 || !strings.Contains(toSam[0], "order 4531") || len(hook.posts()) != 2 {
		t.Fatalf("after enabling sam again: %d messages to sam, %d posts; want the one of order 4531 on each channel", len(toSam), len(hook.posts()))
	}
}
