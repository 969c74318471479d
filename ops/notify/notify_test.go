package notify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/notify"
	"github.com/settle-dev/settle/ops/opstest"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
	"github.com/settle-dev/settle/ops/refund"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

type world struct {
	db     *pg.DB
	clock  *ops.ManualClock
	ledger *ops.Ledger
	tenant int64
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{db: pgtest.New(t), clock: ops.NewManualClock(t0)}
	w.ledger = ops.NewLedger(w.db, w.clock)
	w.ledger.Register(refund.Kind(), llm.Kind(), jobs.Kind(false))
	if err := w.db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (name) VALUES ('shop') RETURNING id`).Scan(&w.tenant); err != nil {
		t.Fatal(err)
	}
	return w
}

// seed builds operations in given states on the world's ledger.
func (w *world) seed() *opstest.Seeder { return opstest.New(w.ledger, w.db) }

// unknownRefund opens a refund of order and leaves it unknown after a saved 500.
func (w *world) unknownRefund(t *testing.T, order string) *ops.Operation {
	t.Helper()
	ctx := context.Background()
	in := ops.Intent{TenantID: w.tenant, Kind: ops.KindRefund, Provider: "stripe", IntentKey: order + ":3800:usd",
		Fingerprint: "fp-" + order, OrderRef: order, AmountCents: 3800, Currency: "usd", PaymentRef: "pi_1", Retention: 24 * time.Hour}
	o, err := w.seed().Open(ctx, in, "req-"+order, "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := w.seed().Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeServerError, HTTPStatus: 500})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func (w *world) follow(t *testing.T, email string, ops_ ...*ops.Operation) {
	t.Helper()
	ctx := context.Background()
	var id int64
	if err := w.db.Pool.QueryRow(ctx, `INSERT INTO users (email, password_hash, role) VALUES ($1, 'x', 'support') RETURNING id`,
		email).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops_ {
		if created, err := deskstore.New(w.db).AddFollowUp(ctx, id, op.ID, w.clock.Now()); err != nil || !created {
			t.Fatalf("follow %s: %v %v", op.ID, created, err)
		}
	}
}

func (w *world) closeFound(t *testing.T, op *ops.Operation, ref string) *ops.Operation {
	t.Helper()
	out, err := w.ledger.Close(context.Background(), ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded,
		Actor: "oncall@example.com", Evidence: ops.Evidence{Kind: ops.EvidenceLookup, ProviderRef: ref, Summary: "found at Stripe"}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// relays are what each of two replicas runs: a relay per channel.
func (w *world) relays(hookURL string, box *mailbox) []*outbox.Relay {
	smtpConf, _ := notify.ParseSMTPURL("smtp://settle:s3cret@" + box.addr + "?from=settle@example.com")
	var out []*outbox.Relay
	for range 2 {
		out = append(out,
			&outbox.Relay{Store: pg.FollowUpOutbox{DB: w.db, Channel: "webhook"}, Clock: w.clock, Hold: 30 * time.Second,
				Publisher: &notify.Webhook{URL: hookURL, Operations: w.db, Kinds: w.ledger}},
			&outbox.Relay{Store: pg.FollowUpOutbox{DB: w.db, Channel: "email"}, Clock: w.clock, Hold: 30 * time.Second,
				Publisher: &notify.Mail{Server: smtpConf, Operations: w.db, Kinds: w.ledger, Clock: w.clock, RootCAs: box.roots}})
	}
	return out
}

// runAll runs every relay once, at the same time, as replicas would.
func runAll(t *testing.T, relays []*outbox.Relay) {
	t.Helper()
	var wg sync.WaitGroup
	for _, r := range relays {
		wg.Go(func() {
			if _, err := r.RunOnce(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestSettledFollowUpsAreDeliveredOnceEachByWebhookAndMail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	a, b := w.unknownRefund(t, "4520"), w.unknownRefund(t, "4521")
	w.follow(t, "sam@example.com", a, b)
	w.follow(t, "kim@example.com", a)
	hook, hookURL := newHookServer(t)
	box := startMailbox(t)
	relays := w.relays(hookURL, box)

	runAll(t, relays)
	if n := len(hook.posts()) + len(box.received()); n != 0 {
		t.Fatalf("%d notifications before anything settled", n)
	}
	w.clock.Advance(time.Minute)
	a, b = w.closeFound(t, a, "re_4520"), w.closeFound(t, b, "re_4521")

	runAll(t, relays)
	if got := len(hook.posts()); got != 2 {
		t.Fatalf("first pass: %d webhook posts accepted, want 2 (the first was answered 500)", got)
	}
	if got := len(box.received()); got != 2 {
		t.Fatalf("first pass: %d messages, want 2 (the first recipient was refused with 451)", got)
	}
	failed := 0
	for _, op := range []*ops.Operation{a, b} {
		ds, err := w.db.FollowUpDeliveries(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.PublishedAt == nil {
				failed++
				if d.Attempts != 1 || d.LastError == "" {
					t.Fatalf("undelivered %s notification: attempts %d, last error %q", d.Channel, d.Attempts, d.LastError)
				}
			}
		}
	}
	if failed != 2 {
		t.Fatalf("%d notifications wait for a retry, want 2 (one per channel)", failed)
	}

	// The backoff after a first failure is 2 s: nothing is tried again before it ends.
	runAll(t, relays)
	if len(hook.posts()) != 2 || len(box.received()) != 2 {
		t.Fatal("a failed notification was retried before its backoff ended")
	}
	w.clock.Advance(3 * time.Second)
	runAll(t, relays)
	w.clock.Advance(time.Hour)
	runAll(t, relays)

	want := map[string]string{} // follower and operation -> sentence
	for _, p := range []struct {
		who string
		op  *ops.Operation
	}{{"sam@example.com", a}, {"sam@example.com", b}, {"kim@example.com", a}} {
		want[p.who+" "+p.op.OrderRef] = refund.CustomerStatus(p.op, nil).Sentence
	}
	checkHooks(t, hook.posts(), want)
	checkMail(t, box, want)
	for _, op := range []*ops.Operation{a, b} {
		ds, _ := w.db.FollowUpDeliveries(ctx, op.ID)
		for _, d := range ds {
			if d.PublishedAt == nil {
				t.Fatalf("%s notification %s never marked delivered", d.Channel, d.EventID)
			}
		}
	}
}

// checkHooks asserts one accepted post per settled follow-up, each with the sentence of its
// outcome and a distinct event id. It crosses off a copy of want: checkMail checks the same
// follow-ups after it.
func checkHooks(t *testing.T, posts []hookPost, want map[string]string) {
	t.Helper()
	want = maps.Clone(want)
	if len(posts) != len(want) {
		t.Fatalf("%d webhook posts accepted, want %d (one per settled follow-up)", len(posts), len(want))
	}
	seen := map[string]bool{}
	for _, p := range posts {
		if seen[p.EventID] || p.EventID == "" {
			t.Fatalf("event id %q posted twice or missing", p.EventID)
		}
		seen[p.EventID] = true
		text, _ := p.Body["text"].(string)
		blocks := fmt.Sprint(p.Body["blocks"])
		key := ""
		for k, sentence := range want {
			who, order, _ := strings.Cut(k, " ")
			if strings.Contains(text, "order "+order) && strings.Contains(blocks, who) && strings.Contains(text, sentence) {
				key = k
			}
		}
		if key == "" || !strings.Contains(blocks, p.EventID) {
			t.Fatalf("post %q names no expected follow-up with its sentence and event id (blocks %s)", text, blocks)
		}
		delete(want, key)
	}
}

// checkMail asserts one message per settled follow-up, to the follower, over STARTTLS.
func checkMail(t *testing.T, box *mailbox, want map[string]string) {
	t.Helper()
	msgs := box.received()
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3 (one per settled follow-up)", len(msgs))
	}
	if !box.tlsUsed {
		t.Fatal("the messages went in clear although the server offered STARTTLS")
	}
	seen := map[string]bool{}
	got := map[string]bool{}
	for _, m := range msgs {
		parsed, err := mail.ReadMessage(strings.NewReader(string(m.Data)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(quotedprintable.NewReader(parsed.Body))
		id := parsed.Header.Get("Settle-Event-Id")
		if seen[id] || id == "" || !strings.Contains(parsed.Header.Get("Message-Id"), id) {
			t.Fatalf("message ids: event %q, Message-ID %q", id, parsed.Header.Get("Message-Id"))
		}
		seen[id] = true
		if m.From != "settle@example.com" || parsed.Header.Get("To") != m.To {
			t.Fatalf("from %q to %q (header %q)", m.From, m.To, parsed.Header.Get("To"))
		}
		for order := range strings.SplitSeq("4520 4521", " ") {
			if strings.Contains(string(body), "order "+order) {
				got[m.To+" "+order] = strings.Contains(strings.ReplaceAll(string(body), "\r\n", "\n"), want[m.To+" "+order])
			}
		}
	}
	for k := range want {
		if !got[k] {
			t.Fatalf("no message with its sentence for %s; got %v", k, got)
		}
	}
}

// flakyMark is a follow-ups' outbox whose first mark as delivered is lost, as when a
// replica dies after the receiver took the message and before it wrote that down.
type flakyMark struct {
	pg.FollowUpOutbox
	lost bool
}

func (f *flakyMark) MarkPublished(ctx context.Context, ids []int64, at time.Time) error {
	if !f.lost {
		f.lost = true
		return errors.New("the replica died")
	}
	return f.FollowUpOutbox.MarkPublished(ctx, ids, at)
}

// TestACrashAfterSendingResendsWithTheSameID states the guarantee: at least once. A relay
// that dies between the receiver's acceptance and the mark sends the notification again once
// its hold ends, with the same event id (header, Message-ID and text), so a receiver can
// drop the copy; without the crash it is sent once.
func TestACrashAfterSendingResendsWithTheSameID(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	op := w.unknownRefund(t, "4522")
	w.follow(t, "sam@example.com", op)
	hook, hookURL := newHookServer(t)
	hook.refused = 1 // this receiver takes every post
	w.clock.Advance(time.Minute)
	w.closeFound(t, op, "re_4522")
	relay := &outbox.Relay{Store: &flakyMark{FollowUpOutbox: pg.FollowUpOutbox{DB: w.db, Channel: "webhook"}}, Clock: w.clock,
		Hold: 30 * time.Second, Publisher: &notify.Webhook{URL: hookURL, Operations: w.db, Kinds: w.ledger}}
	if _, err := relay.RunOnce(context.Background()); err == nil {
		t.Fatal("the lost mark went unreported")
	}
	w.clock.Advance(10 * time.Second)
	_, _ = relay.RunOnce(context.Background())
	if n := len(hook.posts()); n != 1 {
		t.Fatalf("%d posts while the first send's hold lasts, want 1", n)
	}
	w.clock.Advance(time.Minute)
	for range 3 {
		if _, err := relay.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	posts := hook.posts()
	if len(posts) != 2 || posts[0].EventID != posts[1].EventID || posts[0].EventID == "" {
		t.Fatalf("posts %+v: want the one resend after the crash, with the same event id", posts)
	}
}
