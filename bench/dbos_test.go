package bench

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/settle-dev/settle/ops"
)

// dbosDB is DBOS's system database: a database of its own on the bench cluster, so its
// commits are counted apart from Settle's.
const dbosDB = "bench_dbos"

// refund is the input of the DBOS workflow: the fields of the intent that Settle stores on
// an operation, so that both record the same request. ops.Intent itself cannot be the
// input, as DBOS encodes inputs as JSON and the intent carries a function.
type refund struct {
	TenantID    int64
	Kind        ops.Kind
	Provider    string
	IntentKey   string
	Fingerprint string
	OrderRef    string
	CustomerRef string
	PaymentRef  string
	AmountCents int64
	Currency    string
	Request     []byte
	RequestRef  string
}

// refundWorkflow is Settle's lifecycle written as DBOS documents it: a workflow whose id
// is the intent's key, with one step that sends to the provider. DBOS records the
// workflow with its input when it starts, the step's output when the step returns and the
// workflow's output when it ends, each durably before going on.
func refundWorkflow(ctx dbos.Context, in refund) (ops.Result, error) {
	id, err := dbos.GetWorkflowID(ctx)
	if err != nil {
		return ops.Result{}, err
	}
	return dbos.RunAsStep(ctx, func(ctx context.Context) (ops.Result, error) {
		// The same provider as Settle's benchmark: okSender answers at once, in process.
		op := &ops.Operation{ID: id, TenantID: in.TenantID, Kind: in.Kind, Provider: in.Provider,
			IntentKey: in.IntentKey, Fingerprint: in.Fingerprint, OrderRef: in.OrderRef,
			CustomerRef: in.CustomerRef, PaymentRef: in.PaymentRef, AmountCents: in.AmountCents,
			Currency: in.Currency, Request: in.Request}
		r := okSender.Send(ctx, op, &ops.Attempt{N: 1})
		if r.Outcome != ops.OutcomeOK || r.Result == nil {
			return ops.Result{}, fmt.Errorf("provider answered %s", r.Outcome)
		}
		return *r.Result, nil
	}, dbos.WithStepName("send"))
}

var dbosMigrated bool

// benchDBOS runs DBOS Transact v1.9.0 with its defaults (a pool of 20 connections, JSON
// encoding, every record committed before the workflow goes on) on its own system
// database: each of the four clients runs a refund workflow and waits for its result.
// Starting DBOS and shutting it down are part of the measured database's counts, as
// River's are, but not of its time.
func benchDBOS(b *testing.B) {
	url := dbosDatabase(b)
	measure(b, "dbos", dbosDB, "workflows/s", func() (func(ctx context.Context, i int) error, func()) {
		return dbosWorkflows(b, url)
	})
}

// dbosDatabase returns the URL of DBOS's system database, its schema migrated once per
// process.
func dbosDatabase(b *testing.B) string {
	url := database(b, dbosDB, false)
	if !dbosMigrated {
		if err := dbos.Migrate(context.Background(), url, dbos.WithMigrateLogger(slog.New(slog.DiscardHandler))); err != nil {
			b.Fatalf("bench: migrate dbos: %v", err)
		}
		dbosMigrated = true
	}
	return url
}

// dbosWorkflows launches DBOS on url and returns the i-th refund workflow of a new run,
// started and waited for, and the function that shuts DBOS down.
func dbosWorkflows(b *testing.B, url string) (func(ctx context.Context, i int) error, func()) {
	ctx := context.Background()
	dctx, err := dbos.NewContext(ctx, dbos.Config{AppName: "settle-bench", DatabaseURL: url,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	dbos.RegisterWorkflow(dctx, refundWorkflow)
	if err := dbos.Launch(dctx); err != nil {
		b.Fatal(err)
	}
	run := runID()
	work := func(_ context.Context, i int) error {
		in := intent(1, run, i)
		h, err := dbos.RunWorkflow(dctx, refundWorkflow, refund{TenantID: in.TenantID, Kind: in.Kind,
			Provider: in.Provider, IntentKey: in.IntentKey, Fingerprint: in.Fingerprint, OrderRef: in.OrderRef,
			CustomerRef: in.CustomerRef, PaymentRef: in.PaymentRef, AmountCents: in.AmountCents,
			Currency: in.Currency, Request: in.Request, RequestRef: fmt.Sprintf("req-%s-%d", run, i)},
			dbos.WithWorkflowID(in.IntentKey))
		if err != nil {
			return err
		}
		res, err := h.GetResult()
		if err != nil {
			return err
		}
		if res.ProviderRef != "re_"+in.IntentKey {
			return fmt.Errorf("workflow %s answered %q", in.IntentKey, res.ProviderRef)
		}
		return nil
	}
	return work, func() {
		if err := dbos.Shutdown(dctx, time.Minute); err != nil {
			b.Fatalf("bench: shut dbos down: %v", err)
		}
	}
}
