package stripe_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
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
	fk := fake.NewStripe(fake.StripeOptions{Seed: 1})
	if err := fk.ImportRefunds(rs); err != nil {
		t.Fatal(err)
	}
	base, err := fk.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fk.Close() })
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
	for _, i := range []int{0, 99, 100, 101, 999, 1000, n - 1} {
		rec := recs[i]
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
