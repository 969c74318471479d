// Package recon reconciles what the providers billed with what Settle recorded: it records
// every provider charge once, closes operations nobody knew the outcome of when a provider
// record explains them (through the ledger's compare-and-set close, with the record as
// evidence), and reports double, orphan and missing charges to the exception queue, each
// once however many runs see it.
//
// One reconciler acts at a time per provider across replicas: each run holds the provider's
// role (ops.Role) and gives up if another replica holds it.
package recon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
)

// RefundSource is what reconciliation needs from a payment provider; the Stripe adapter is
// one.
type RefundSource interface {
	// Name is the provider's name as stored on operations ("stripe").
	Name() string
	// ListRefunds hands each every refund created in [from, to), a batch at a time, in
	// every account the provider keeps Settle's tenants' payments in, each record naming
	// its account. When some of it cannot be read it lists the rest and returns the error;
	// an error from each stops it and is returned as it is.
	ListRefunds(ctx context.Context, from, to time.Time, each func([]ops.ProviderRecord) error) error
	// Lookup returns the provider's refunds that carry the operation's id.
	Lookup(ctx context.Context, op *ops.Operation) (ops.LookupResult, error)
}

// UsageSource is what reconciliation needs from an LLM provider: its usage report, billed
// requests per time bucket, API key and model. The OpenAI adapter's UsageReader
// (ops/openai) is one.
type UsageSource interface {
	// Name is the provider's name as stored on operations.
	Name() string
	// Usage returns the report for the whole buckets of width in w.
	Usage(ctx context.Context, w Window, width time.Duration) ([]UsageRow, error)
}

// A UsageSource whose report counts tokens instead of requests is a PromptTokenReport
// (prompts.go).

// UsageReports is a UsageSource whose provider bills its APIs in reports of their own
// (OpenAI counts chat completions and responses in its completions report and embeddings in
// another): each report is compared only with the attempts of the routes it counts, so a
// bucket of one report is never made up by calls another report bills. A source that is
// not one keeps one report for every route.
type UsageReports interface {
	// ReportOf names the report (UsageRow.Report) that counts the calls of a gateway route.
	ReportOf(route string) string
}

// Defaults for a Reconciler's zero fields.
const (
	DefaultInterval     = 5 * time.Minute
	DefaultLookback     = 24 * time.Hour
	DefaultOverlap      = 15 * time.Minute
	DefaultLeaseFor     = 10 * time.Minute
	DefaultUsageWidth   = time.Hour
	DefaultReportDelay  = 10 * time.Minute
	DefaultMissingBatch = 200
	// MaxLookback caps how far back a background run reaches after a long outage; older
	// windows are for the one-off command.
	MaxLookback = 31 * 24 * time.Hour
)

// Reconciler compares provider records with the ledger. Set the fields, then run its Loop in
// the background or call Reconcile for one window.
type Reconciler struct {
	Ledger *ops.Ledger
	Store  Store
	// Events is the ledger's store, through which what a provider's records settle closes
	// operations.
	Events ops.EventStore
	// Leases holds the leases: the reconciler of each provider is a role (ops.Role) of the
	// lease LeaseName(provider).
	Leases ops.LeaseStore
	// Refunds and Usage are the providers to reconcile, by kind of report.
	Refunds []RefundSource
	Usage   []UsageSource
	// Owner names this process in the lease ("reconciler:<worker id>", with a token per run
	// after it) and as the actor of what it closes.
	Owner string
	// Interval is the time between background runs.
	Interval time.Duration
	// Lookback is how far back the first background run reaches; Overlap is how much of the
	// last reconciled window each later run reads again, for records that show up late.
	Lookback time.Duration
	Overlap  time.Duration
	// LeaseFor is how long one run may take; the run is cut off after nine tenths of it.
	LeaseFor time.Duration
	// Heartbeat is how long the role's lease lasts unless its holder renews it, which a run
	// does every third of it: a replica that dies mid-run is taken over within Heartbeat.
	// Default LeaseFor.
	Heartbeat time.Duration
	// UsageWidth is the bucket of the LLM usage comparison; ReportDelay is how long after a
	// bucket ends before its usage report is taken as complete.
	UsageWidth  time.Duration
	ReportDelay time.Duration
	// MissingBatch bounds the lookups one run makes for succeeded operations whose charge it
	// has not seen.
	MissingBatch int
	Logger       *slog.Logger
	// Progress, when set, hears how far a run is: a one-off run over many days takes long
	// enough that the person who started it wants to see it move.
	Progress Progress
}

// Progress is told about each stage of a run: its size, the units done, its end. The
// command line's progress reporter is one; the background runs leave it unset.
type Progress interface {
	Start(total int, unit string)
	Add(n int)
	Done()
}

// noProgress is the Progress of a reconciler that has none.
type noProgress struct{}

func (noProgress) Start(int, string) {}
func (noProgress) Add(int)           {}
func (noProgress) Done()             {}

func (r *Reconciler) progress() Progress {
	if r.Progress != nil {
		return r.Progress
	}
	return noProgress{}
}

// Report says what one run did. Counts of new things are what this run added; a second
// run over the same window reports zeros.
type Report struct {
	Provider string    `json:"provider"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	// Skipped is set when another reconciler held the lease; Holder names it.
	Skipped   bool       `json:"skipped,omitempty"`
	Holder    string     `json:"holder,omitempty"`
	HeldUntil *time.Time `json:"held_until,omitempty"`

	Listed     int `json:"listed"`
	NewCharges int `json:"new_charges"`
	Closed     int `json:"closed"`
	InFlight   int `json:"in_flight"`
	Looked     int `json:"looked_up"`
	Refused    int `json:"refused,omitempty"`

	Orphans       int `json:"orphans"`
	DoubleCharges int `json:"double_charges"`
	Missing       int `json:"missing"`
	ChargedFailed int `json:"charged_failed"`

	UsageRows     int   `json:"usage_rows,omitempty"`
	NewUsageRows  int   `json:"new_usage_rows,omitempty"`
	Buckets       int   `json:"buckets,omitempty"`
	Billed        int64 `json:"billed,omitempty"`
	Answered      int64 `json:"answered,omitempty"`
	UsageMismatch int   `json:"usage_mismatches,omitempty"`
	// BilledTokens and AnsweredTokens compare a report that counts prompt tokens instead of
	// requests (PromptTokenReport): those billed, and those of Settle's answered attempts.
	BilledTokens   int64 `json:"billed_prompt_tokens,omitempty"`
	AnsweredTokens int64 `json:"answered_prompt_tokens,omitempty"`
	NewExceptions  int   `json:"new_exceptions"`
	SeenExceptions int   `json:"seen_exceptions"`
}

// Summary is the report in one line, for logs and the command line.
func (r Report) Summary() string {
	w := fmt.Sprintf("%s %s..%s", r.Provider, r.From.UTC().Format(time.RFC3339), r.To.UTC().Format(time.RFC3339))
	if r.Skipped {
		return fmt.Sprintf("%s: skipped, %s holds the reconciler lease", w, r.Holder)
	}
	if r.BilledTokens > 0 || r.AnsweredTokens > 0 {
		return fmt.Sprintf("%s: %d usage rows (%d new), %d buckets, %d prompt tokens billed vs %d in %d answered attempts, %d mismatches, %d new exceptions",
			w, r.UsageRows, r.NewUsageRows, r.Buckets, r.BilledTokens, r.AnsweredTokens, r.Answered, r.UsageMismatch, r.NewExceptions)
	}
	if r.Buckets > 0 || r.UsageRows > 0 {
		return fmt.Sprintf("%s: %d usage rows (%d new), %d buckets, %d billed vs %d answered, %d mismatches, %d new exceptions",
			w, r.UsageRows, r.NewUsageRows, r.Buckets, r.Billed, r.Answered, r.UsageMismatch, r.NewExceptions)
	}
	return fmt.Sprintf("%s: %d refunds listed, %d new, %d operations closed, %d orphan, %d double-charged, %d missing, %d charged after failing, %d looked up, %d new exceptions (%d seen before)",
		w, r.Listed, r.NewCharges, r.Closed, r.Orphans, r.DoubleCharges, r.Missing, r.ChargedFailed, r.Looked, r.NewExceptions, r.SeenExceptions)
}

// Providers lists the names of the providers this reconciler knows.
func (r *Reconciler) Providers() []string {
	var out []string
	for _, s := range r.Refunds {
		out = append(out, s.Name())
	}
	for _, s := range r.Usage {
		out = append(out, s.Name())
	}
	return out
}

// Loop is the reconciler's background loop: a run of every provider every Interval. Every
// replica may run it: each provider's role lets one replica reconcile it at a time.
func (r *Reconciler) Loop() *ops.Loop {
	return ops.NewLoop(r.Logger, "reconciler", orDefault(r.Interval, DefaultInterval), func(ctx context.Context, log *slog.Logger) (bool, error) {
		reports, err := r.RunOnce(ctx)
		for _, rep := range reports {
			if !rep.Skipped {
				log.Info("reconciled", "summary", rep.Summary())
			}
		}
		return false, err
	})
}

// RunOnce reconciles every provider from where the last background run got to (less the
// overlap) until now. A failed run leaves that point where it was, so the next run reads
// the same window again; recording is idempotent, so nothing is counted twice.
func (r *Reconciler) RunOnce(ctx context.Context) ([]Report, error) {
	var reports []Report
	var errs []error
	for _, name := range r.Providers() {
		rep, err := r.run(ctx, name, r.backgroundWindow, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("reconcile %s: %w", name, err))
		}
		reports = append(reports, rep)
	}
	return reports, errors.Join(errs...)
}

// Reconcile reconciles one provider over one window, as 'settle reconcile' does. It takes
// the same lease as the background runs; Report.Skipped says another reconciler held it.
func (r *Reconciler) Reconcile(ctx context.Context, provider string, w Window) (Report, error) {
	if err := CheckWindow(w, r.Ledger.Clock.Now()); err != nil {
		return Report{Provider: provider, From: w.From, To: w.To}, err
	}
	return r.run(ctx, provider, func(time.Time, Lease) Window { return w }, false)
}

func (r *Reconciler) backgroundWindow(now time.Time, l Lease) Window {
	from := now.Add(-orDefault(r.Lookback, DefaultLookback))
	if l.DoneUntil != nil {
		from = l.DoneUntil.Add(-orDefault(r.Overlap, DefaultOverlap))
	}
	if oldest := now.Add(-MaxLookback); from.Before(oldest) {
		from = oldest
	}
	return Window{From: from, To: now}
}

// LeaseName is the lease row of one provider's reconciler.
func LeaseName(provider string) string { return "reconcile:" + provider }

func (r *Reconciler) run(ctx context.Context, provider string, window func(time.Time, Lease) Window, advance bool) (Report, error) {
	rep := Report{Provider: provider}
	var refunds RefundSource
	var usage UsageSource
	for _, s := range r.Refunds {
		if s.Name() == provider {
			refunds = s
		}
	}
	for _, s := range r.Usage {
		if s.Name() == provider {
			usage = s
		}
	}
	if refunds == nil && usage == nil {
		known := strings.Join(r.Providers(), ", ")
		if known == "" {
			known = "none"
		}
		return rep, ops.Errorf(ops.EINVALID, "No provider %q is set up for reconciliation (set up: %s).", provider, known)
	}
	leaseFor := orDefault(r.LeaseFor, DefaultLeaseFor)
	name := LeaseName(provider)
	// The watermark read before the lease is taken may be a run behind, which only makes the
	// overlap longer: recording is idempotent.
	progress, err := r.Store.ReconRun(ctx, name)
	if err != nil {
		return rep, fmt.Errorf("read the reconciler's progress: %w", err)
	}
	w := window(r.Ledger.Clock.Now(), progress)
	rep.From, rep.To = w.From, w.To
	role := ops.NewRole(r.Leases, r.Ledger.Clock, r.logger(), name, r.owner(), orDefault(r.Heartbeat, leaseFor))
	holder, held, err := role.Hold(ctx, func(ctx context.Context, l ops.Lease) error {
		// Stop well before the run's bound: a run of days is for the one-off command.
		runCtx, cancel := context.WithTimeout(ctx, leaseFor*9/10)
		defer cancel()
		var err error
		if refunds != nil {
			err = r.reconcileRefunds(runCtx, refunds, w, &rep)
		} else {
			err = r.reconcileUsage(runCtx, usage, w, &rep)
		}
		var done *time.Time
		if err == nil && advance {
			done = &w.To
		}
		body, _ := json.Marshal(rep)
		recorded, rerr := r.Store.RecordRun(context.WithoutCancel(ctx), l, r.Ledger.Clock.Now(), done, body)
		if rerr == nil && !recorded {
			rerr = ops.ErrLeaseLost
		}
		if rerr != nil {
			err = errors.Join(err, fmt.Errorf("record the reconciler's run: %w", rerr))
		}
		return err
	})
	if err == nil && !held {
		rep.Skipped, rep.Holder = true, holder.Owner
		if !holder.Until.IsZero() {
			rep.HeldUntil = &holder.Until
		}
	}
	return rep, err
}

func (r *Reconciler) owner() string {
	if r.Owner != "" {
		return r.Owner
	}
	return "reconciler"
}

// actor is who the audit log and the evidence name for what the reconciler does.
func (r *Reconciler) actor(provider string) string {
	return provider + " reconciliation (" + r.owner() + ")"
}

func (r *Reconciler) record(ctx context.Context, rep *Report, f Finding) error {
	_, created, err := r.Store.RecordFinding(ctx, f)
	if err != nil {
		return fmt.Errorf("record %s %s: %w", f.Kind, f.Ref, err)
	}
	if created {
		rep.NewExceptions++
	} else {
		rep.SeenExceptions++
	}
	return nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// logger is Logger, given when the reconciler is built; without one (a test that calls
// RunOnce) it logs nothing, never to the process's global logger.
func (r *Reconciler) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}
