package recon

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
)

// MetricsFilter chooses the windows of the reconciliation table.
type MetricsFilter struct {
	Window
	// Bucket is the width of one row's window: an hour or a day.
	Bucket   time.Duration
	TenantID int64
	Kind     ops.Kind
	Provider string
	// API keeps the rows of one API of an LLM provider, by its label (ops.Call.Label:
	// "responses"); "" keeps every row.
	API string
}

// MetricsKey is what one row of the reconciliation table is about. TenantID 0 and Kind ""
// mean "none": a charge with no operation has neither. API is the label of the API an LLM
// operation called ("chat_completions", "responses", "messages", "embeddings"), "" for rows
// of no such API (a refund, a request refused before it had an operation).
type MetricsKey struct {
	Bucket   time.Time
	TenantID int64
	Kind     ops.Kind
	Provider string
	API      string
}

// Money is amounts per currency, in micro-units (millionths) of the currency's unit: a
// refund's amount in the minor unit counts ops.MicrosPerMinor of them each (10,000 a cent,
// 1,000,000 a yen), so refunds and LLM costs add up without rounding. Its String formats
// each amount with ops.FormatMicros.
type Money map[string]int64

// Add adds micros of currency to m.
func (m Money) Add(currency string, micros int64) {
	if micros != 0 {
		m[currency] += micros
	}
}

// String writes m currency by currency in alphabetical order, each as ops.FormatMicros
// does, joined by ", "; it is empty when m holds nothing.
func (m Money) String() string {
	cur := make([]string, 0, len(m))
	for c := range m {
		cur = append(cur, c)
	}
	sort.Strings(cur)
	parts := make([]string, 0, len(cur))
	for _, c := range cur {
		parts = append(parts, ops.FormatMicros(m[c], c))
	}
	return strings.Join(parts, ", ")
}

// MetricsRow counts, for one window, tenant, kind, provider and API, what came in, what was
// sent and what the provider billed. Every number is a count of recorded rows (ops rule 8).
type MetricsRow struct {
	MetricsKey
	// ClientRequests counts client requests received in the window; Duplicates those mapped
	// to an existing operation; Replays those answered from a stored result.
	ClientRequests int64
	Duplicates     int64
	Replays        int64
	// InProgress, Conflicts, Checking and Rejected count the requests answered 409 (the
	// same key in flight), 422 (another fingerprint), "checking" (the outcome is unknown)
	// and refused at the door (bad input, a budget, a share); Cancels the cancels of what an
	// operation started (ops.Answer.Cancel), answered or refused.
	InProgress int64
	Conflicts  int64
	Checking   int64
	Rejected   int64
	Cancels    int64
	// BudgetRefused counts those of the Rejected refused because their tenant's LLM budget
	// of the day was spent (llm.ReasonBudgetSpent): the gateway's calls and resends and the
	// jobs held back, which the built-in TenantLLMBudgetSpent rule reads.
	BudgetRefused int64
	// BudgetTooSmall counts those of the Rejected refused because what was left of their
	// tenant's LLM budget could not pay for their worst case (llm.ReasonBudgetTooSmall):
	// a tenant all of whose calls are refused so is as stopped as a spent one.
	BudgetTooSmall int64
	// Operations counts operations created in the window; Succeeded, Failed, Unknown and
	// Expired those of them whose status is that now.
	Operations int64
	Succeeded  int64
	Failed     int64
	Unknown    int64
	Expired    int64
	// Attempts counts attempts started in the window; AttemptsSent those that left for the
	// provider; Timeouts those whose outcome was a timeout.
	Attempts     int64
	AttemptsSent int64
	Timeouts     int64
	// Charges counts the provider's charged records for the operations created in the window,
	// plus charges with no operation made in the window (Orphans). DoubleCharges counts the
	// records beyond the first of one operation.
	Charges       int64
	Orphans       int64
	DoubleCharges int64
	// Saved is what replays saved: each replayed request would otherwise have cost the
	// operation's amount again. Lost is the amount of the double charges.
	Saved Money
	Lost  Money
}

// Admitted counts the client requests that asked for a paid side effect: every request but
// those refused at the door, which asked for nothing Settle took on, and the cancels, which
// pay for no call. It is the duplicate rate's denominator: a refused request or a cancel
// could not repeat an intent, so counting them would dilute the rate.
func (r MetricsRow) Admitted() int64 { return r.ClientRequests - r.Rejected - r.Cancels }

// Difference is provider charges minus operations that succeeded: zero when every
// succeeded operation was billed exactly once and nothing else was billed. Positive means
// double or orphan charges; negative means succeeded operations the provider does not show
// (yet: only reconciliation records charges).
func (r MetricsRow) Difference() int64 { return r.Charges - r.Succeeded }

// Measure names one number of the reconciliation table, for the drill-down.
type Measure string

// The measures that can be drilled into.
const (
	MeasureClientRequests Measure = "client_requests"
	// MeasureAdmitted is MetricsRow.Admitted.
	MeasureAdmitted      Measure = "admitted_requests"
	MeasureDuplicates    Measure = "duplicates"
	MeasureReplays       Measure = "replays"
	MeasureOperations    Measure = "operations"
	MeasureSucceeded     Measure = "succeeded"
	MeasureAttempts      Measure = "attempts"
	MeasureTimeouts      Measure = "timeouts"
	MeasureCharges       Measure = "charges"
	MeasureOrphans       Measure = "orphans"
	MeasureDoubleCharges Measure = "double_charges"
)

// Measures lists the measures in table order.
var Measures = []Measure{MeasureClientRequests, MeasureAdmitted, MeasureDuplicates, MeasureReplays, MeasureOperations, MeasureSucceeded,
	MeasureAttempts, MeasureTimeouts, MeasureCharges, MeasureOrphans, MeasureDoubleCharges}

// Valid reports whether m is a known measure.
func (m Measure) Valid() bool {
	for _, v := range Measures {
		if v == m {
			return true
		}
	}
	return false
}

// DrillFilter names one cell of the reconciliation table.
type DrillFilter struct {
	MetricsKey
	Width   time.Duration
	Measure Measure
	Limit   int
}

// DrillRow is one recorded row behind a number: a client request, an operation, an attempt
// or a provider charge, with the operation it belongs to.
type DrillRow struct {
	At          time.Time
	OperationID string
	TenantID    int64
	Kind        ops.Kind
	Provider    string
	// Ref is the row's own reference: a request ref, an attempt number, a charge id.
	Ref string
	// Detail is the row's state: an answer, a status, an outcome.
	Detail      string
	AmountCents int64
	Currency    string
}

// MetricsStore reads the reconciliation table and what is behind each number.
type MetricsStore interface {
	// ReconMetrics counts the raw rows of the window, through their time indexes: exact as
	// of now, and meant for short windows (alert rules). Pages read RollupMetrics.
	ReconMetrics(ctx context.Context, f MetricsFilter) ([]MetricsRow, error)
	// RollupMetrics reads the same table from the per-minute rollups, as of the rollup
	// job's last run: a few thousand rows whatever the size of the raw tables.
	RollupMetrics(ctx context.Context, f MetricsFilter) ([]MetricsRow, error)
	// RollupStatus says how far the rollup job has got.
	RollupStatus(ctx context.Context) (RollupState, error)
	ReconDrill(ctx context.Context, f DrillFilter) ([]DrillRow, error)
}
