package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	stripelib "github.com/stripe/stripe-go/v76"
	stripeclient "github.com/stripe/stripe-go/v76/client"

	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

func TestReconcileWindowFlags(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	w, err := ReconcileConfig{Since: 24 * time.Hour}.Window(now)
	if err != nil || !w.From.Equal(now.Add(-24*time.Hour)) || !w.To.Equal(now) {
		t.Fatalf("--since 24h: %+v (%v)", w, err)
	}
	w, err = ReconcileConfig{From: "2026-03-01T00:00:00Z", To: "2026-03-01T12:00:00Z"}.Window(now)
	if err != nil || w.To.Sub(w.From) != 12*time.Hour {
		t.Fatalf("--from --to: %+v (%v)", w, err)
	}
	for name, rc := range map[string]ReconcileConfig{
		"negative since": {Since: -time.Hour},
		"reversed":       {From: "2026-03-01T12:00:00Z", To: "2026-03-01T00:00:00Z"},
		"future":         {From: "2026-03-02T00:00:00Z", To: "2026-03-03T00:00:00Z"},
		"bad from":       {From: "yesterday"},
		"to alone":       {Since: time.Hour, To: "2026-03-01T00:00:00Z"},
	} {
		_, err := rc.Window(now)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}

func TestReconcileCommandRecordsOrphanOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := pgtest.NewWithURL(t)
	f := fake.NewStripe(fake.StripeOptions{Clock: func() time.Time { return time.Now().Add(-time.Hour) }})
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.AddPaymentIntent("pi_cmd", 5000, "usd", fake.OwnedBy("shop"))
	outside := stripeclient.New("sk_test", &stripelib.Backends{API: stripelib.GetBackendWithConfig(stripelib.APIBackend,
		&stripelib.BackendConfig{URL: stripelib.String(base), MaxNetworkRetries: stripelib.Int64(0),
			LeveledLogger: &stripelib.LeveledLogger{Level: stripelib.LevelNull}})})
	if _, err := outside.Refunds.New(&stripelib.RefundParams{PaymentIntent: stripelib.String("pi_cmd"), Amount: stripelib.Int64(700)}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Command: "reconcile", DatabaseURL: url, WorkerID: "cli-test",
		Stripe: StripeConfig{APIKey: "sk_test_settle", APIBase: base, Timeout: time.Second}}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	for run := range 2 {
		var out, errOut bytes.Buffer
		if err := runReconcile(ctx, cfg, ReconcileConfig{Provider: "stripe", Since: 24 * time.Hour}, &out, &errOut, logger); err != nil {
			t.Fatal(err)
		}
		want := "1 orphan"
		if !strings.Contains(out.String(), want) || (run == 1 && !strings.Contains(out.String(), "0 new exceptions")) {
			t.Fatalf("run %d printed %q", run, out.String())
		}
		// Neither stream is a terminal here: no progress line, only the summary.
		if errOut.Len() != 0 || strings.Contains(out.String(), "\r") || strings.Count(out.String(), "\n") != 1 {
			t.Fatalf("run %d printed progress: stdout %q, stderr %q", run, out.String(), errOut.String())
		}
	}
	// Progress is how far back through the day's window the listing has gone.
	for _, want := range []string{`msg="reconcile stripe: started" task="reconcile stripe" done=0 total=1440 unit=minutes`,
		`msg="reconcile stripe: done" task="reconcile stripe" done=1440 total=1440 unit=minutes`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM recon_exceptions WHERE kind = 'orphan_charge'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d orphan exceptions (%v), want 1", n, err)
	}
	err = runReconcile(ctx, cfg, ReconcileConfig{Provider: "paypal", Since: time.Hour}, &bytes.Buffer{}, &bytes.Buffer{}, logger)
	if ue := (*usageError)(nil); !errors.As(err, &ue) {
		t.Fatalf("unknown provider: %v, want a usage error", err)
	}
}

// TestReconcileRefusesSinceWithFrom: 'reconcile --since 1h --from T' reconciled from T and
// dropped the --since without a word, a window other than the one asked for (which may read
// a month of the provider's records, and record what it finds). Both together are refused in
// one line with exit 2, before the database is opened.
func TestReconcileRefusesSinceWithFrom(t *testing.T) {
	t.Parallel()
	from := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	args := []string{"reconcile", "--since", "1h", "--from", from}
	code, stdout, stderr := run(t, args, map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:1/db"}, "")
	refusedInOneLine(t, args, code, stdout, stderr, "not both")
}

// TestReconcileNamesTheProviderItCannotReconcile: 'reconcile' from a shell without
// STRIPE_API_KEY, or with --provider misspelt, opened the database, checked the clock and read
// the retention's cutoff before saying "No provider "stripe" is set up for reconciliation (set
// up: none)", with exit 1, and without the variable that sets it up. The provider is checked
// against the configuration first: one line naming what sets it up, exit 2, and the database
// is not opened (here it could not be).
func TestReconcileNamesTheProviderItCannotReconcile(t *testing.T) {
	t.Parallel()
	db := "postgres://u@127.0.0.1:1/db"
	for _, tc := range []struct {
		args []string
		vars map[string]string
		want string
	}{
		{[]string{"reconcile"}, map[string]string{"DATABASE_URL": db}, "STRIPE_API_KEY"},
		{[]string{"reconcile", "--provider", "strpe"}, map[string]string{"DATABASE_URL": db, "STRIPE_API_KEY": "sk_test_1"}, `"strpe"`},
	} {
		code, stdout, stderr := run(t, tc.args, tc.vars, "")
		refusedInOneLine(t, tc.args, code, stdout, stderr, tc.want)
	}
}
