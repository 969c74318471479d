package stripe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/stripe"
)

// A listing keeps each refund as Stripe wrote it: the record's raw JSON is the provider's
// own bytes (the same the refund's own page answers), not stripe-go's encoding of what it
// decoded, across several pages and batches.
func TestListedRecordsKeepStripesOwnBytes(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const n = 1234
	rs := make([]fake.Refund, n)
	for i := range rs {
		rs[i] = fake.Refund{ID: fmt.Sprintf("re_list_%d", i), PaymentIntent: "pi_list", Currency: "usd", Status: "succeeded",
			Amount: int64(100 + i), Created: from.Add(time.Duration(i) * time.Minute),
			Metadata: map[string]string{stripe.MetadataKey: fmt.Sprintf("op-%d", i)}}
	}
	_, base := fakeWithHistory(t, rs)
	a := stripe.New(stripe.Config{APIKey: "sk_test_list", BaseURL: base, ReadsPerSecond: 1e6})
	var recs []ops.ProviderRecord
	batches := 0
	if err := a.ListRefunds(context.Background(), from, from.Add(n*time.Minute), func(b []ops.ProviderRecord) error {
		batches++
		recs = append(recs, b...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(recs) != n || batches < 2 {
		t.Fatalf("listed %d records in %d batches, want %d in several", len(recs), batches, n)
	}
	// The window is listed in parts at once: each refund comes once, whatever part it is in.
	byRef := map[string]int{}
	for i, rec := range recs {
		byRef[rec.Ref] = i
	}
	if len(byRef) != n {
		t.Fatalf("%d distinct refunds in %d records", len(byRef), n)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Created.Before(recs[j].Created) })
	for _, i := range []int{0, 99, 100, 101, 616, 617, 999, 1000, n - 1} {
		rec := recs[i]
		if rec.Ref != fmt.Sprintf("re_list_%d", i) {
			t.Fatalf("record %d is %s", i, rec.Ref)
		}
		want := retrieve(t, base, rec.Ref)
		if !bytes.Equal(bytes.TrimSpace(rec.Raw), want) {
			t.Fatalf("record %d (%s) keeps\n%s\nStripe wrote\n%s", i, rec.Ref, rec.Raw, want)
		}
		if rec.OperationID == "" || rec.AmountCents < 100 || rec.Status != "succeeded" {
			t.Fatalf("record %d: %+v", i, rec)
		}
	}
}

// retrieve reads one refund's own page from the fake, as Stripe wrote it.
func retrieve(t *testing.T, base, id string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/refunds/"+id, nil)
	req.Header.Set("Authorization", "Bearer sk_test_list")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("retrieve %s: %d %s (%v)", id, res.StatusCode, b, err)
	}
	return bytes.TrimSpace(b)
}

// An error from the caller stops every part of the listing, and is what comes back.
func TestListingStopsAtTheCallersError(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	rs := make([]fake.Refund, 3000)
	for i := range rs {
		rs[i] = fake.Refund{ID: fmt.Sprintf("re_stop_%d", i), Currency: "usd", Status: "succeeded", Amount: 100,
			Created: from.Add(time.Duration(i) * time.Second)}
	}
	fk, base := fakeWithHistory(t, rs)
	a := stripe.New(stripe.Config{APIKey: "sk_test_list", BaseURL: base, ReadsPerSecond: 1e6, ListParts: 3})
	stop := errors.New("the ledger is gone")
	pages := func() int {
		n := 0
		for _, c := range fk.Calls() {
			if c.Method == "GET" && c.Path == "/v1/refunds" {
				n++
			}
		}
		return n
	}
	calls, atStop := 0, 0
	err := a.ListRefunds(context.Background(), from, from.Add(time.Hour), func([]ops.ProviderRecord) error {
		calls++
		atStop = pages()
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("listing after the caller's error: %v, %d calls; want the caller's error after one", err, calls)
	}
	time.Sleep(200 * time.Millisecond)
	// Each part may finish the page it was reading; none reads another.
	if after := pages(); after > atStop+3 {
		t.Fatalf("%d pages read after the caller stopped the listing at %d", after, atStop)
	}
}

// fakeWithHistory starts a fake Stripe holding rs, stopped when the test ends.
func fakeWithHistory(t *testing.T, rs []fake.Refund) (*fake.Stripe, string) {
	t.Helper()
	fk := fake.NewStripe(fake.StripeOptions{Seed: 1})
	if err := fk.ImportRefunds(rs); err != nil {
		t.Fatal(err)
	}
	base, err := fk.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fk.Close() })
	return fk, base
}
