package recon

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// bucketUsage is one time bucket of the LLM comparison: what the provider billed against
// what we sent.
type bucketUsage struct {
	// Report is the provider's report the bucket belongs to ("" its main one).
	Report string    `json:"report,omitempty"`
	Start  time.Time `json:"start"`
	// Billed is the provider's count of billed requests; Answered counts our attempts that
	// got an answer, Uncertain those whose outcome we do not know (they may have been
	// billed), Sent every attempt that left.
	Billed    int64            `json:"billed"`
	Answered  int64            `json:"answered"`
	Uncertain int64            `json:"uncertain"`
	Sent      int64            `json:"sent"`
	ByModel   map[string]int64 `json:"billed_by_model,omitempty"`
	SentModel map[string]int64 `json:"sent_by_model,omitempty"`
}

// reconcileUsage records the provider's usage report for the whole buckets of w that have
// ended long enough ago to be complete, and compares each with the attempts we sent.
//
// Unknown LLM operations are first looked up in the provider's stored completions when the
// source can read them (StoredLookups).
//
// LLM providers take no idempotency key, so every answered attempt is billed once, and an
// attempt whose outcome is unknown (a timeout) may have been billed too. A bucket is in
// order when billed equals answered. Billed above answered but within answered plus
// uncertain are retries after uncertain sends that the provider billed: duplicates, money
// lost (low severity; the retry policy allowed them). Billed above that are requests we
// never sent (high). Billed below answered means the report is missing requests (medium).
// A report that counts prompt tokens instead of requests (PromptTokenReport) is compared in
// buckets of its own width by comparePrompts.
func (r *Reconciler) reconcileUsage(ctx context.Context, src UsageSource, w Window, rep *Report) error {
	provider := src.Name()
	if s, ok := src.(StoredLookups); ok {
		if err := r.reconcileStored(ctx, s.StoredLookups(), provider, rep); err != nil {
			return fmt.Errorf("look up %s's unknown calls in its stored completions: %w", provider, err)
		}
	}
	width := orDefault(r.UsageWidth, DefaultUsageWidth)
	prompts, byPrompt := src.(PromptTokenReport)
	if byPrompt {
		width = prompts.PromptBuckets()
	}
	now := r.Ledger.Clock.Now()
	from := w.From.Truncate(width)
	end := w.To
	if complete := now.Add(-orDefault(r.ReportDelay, DefaultReportDelay)); end.After(complete) {
		end = complete
	}
	to := end.Truncate(width)
	rep.From, rep.To = from, to
	if !to.After(from) {
		return nil // no bucket of the window is complete yet
	}
	cw := Window{From: from, To: to}
	rows, err := src.Usage(ctx, cw, width)
	if err != nil {
		return fmt.Errorf("read %s usage: %w", provider, err)
	}
	rep.UsageRows = len(rows)
	if rep.NewUsageRows, err = r.Store.RecordUsage(ctx, provider, rows, now); err != nil {
		return err
	}
	if byPrompt {
		return r.comparePrompts(ctx, provider, rows, cw, width, rep)
	}
	sent, err := r.Store.SentToLLM(ctx, provider, cw, width)
	if err != nil {
		return err
	}
	reportOf := func(string) string { return "" }
	if rs, ok := src.(UsageReports); ok {
		reportOf = rs.ReportOf
	}
	buckets := usageBuckets(rows, sent, reportOf, cw, width)
	pr := r.progress()
	pr.Start(len(buckets), "buckets")
	defer pr.Done()
	for _, b := range buckets {
		pr.Add(1)
		rep.Buckets++
		rep.Billed += b.Billed
		rep.Answered += b.Answered
		if b.Billed == b.Answered {
			continue
		}
		rep.UsageMismatch++
		sev, what := b.mismatch()
		body, _ := json.Marshal(b)
		ref, report := fmt.Sprintf("%s/%s", b.Start.Format(time.RFC3339), width), ""
		if b.Report != "" {
			ref, report = b.Report+" "+ref, " on its "+b.Report+" report"
		}
		if err := r.record(ctx, rep, Finding{Kind: ExceptionUsageMismatch, Provider: provider,
			Ref: ref, Severity: sev, Details: body, Actor: r.actor(provider), At: now,
			Summary: fmt.Sprintf("%s billed %d requests%s in the %s from %s; we got %d answers and %d uncertain attempts: %s.",
				provider, b.Billed, report, width, b.Start.Format("2006-01-02 15:04 MST"), b.Answered, b.Uncertain, what)}); err != nil {
			return err
		}
	}
	return nil
}

// usageBuckets sets the provider's report rows inside w beside what we sent, bucket by bucket
// of width and report by report (reportOf names the report that counts a route's calls), in
// time order.
func usageBuckets(rows []UsageRow, sent []SentRow, reportOf func(route string) string, w Window, width time.Duration) []*bucketUsage {
	type key struct {
		report string
		start  int64
	}
	buckets := map[key]*bucketUsage{}
	get := func(report string, t time.Time) *bucketUsage {
		k := key{report, t.Truncate(width).Unix()}
		if buckets[k] == nil {
			buckets[k] = &bucketUsage{Report: report, Start: time.Unix(k.start, 0).UTC(), ByModel: map[string]int64{}, SentModel: map[string]int64{}}
		}
		return buckets[k]
	}
	for _, u := range rows {
		if u.Start.Before(w.From) || !u.Start.Before(w.To) {
			continue
		}
		b := get(u.Report, u.Start)
		b.Billed += u.Requests
		b.ByModel[u.Model] += u.Requests
	}
	for _, s := range sent {
		b := get(reportOf(s.Route), s.Start)
		b.Answered += s.OK
		b.Uncertain += s.Uncertain
		b.Sent += s.Sent
		b.SentModel[s.Model] += s.Sent
	}
	keys := make([]key, 0, len(buckets))
	for k := range buckets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].start < keys[j].start || keys[i].start == keys[j].start && keys[i].report < keys[j].report
	})
	out := make([]*bucketUsage, len(keys))
	for i, k := range keys {
		out[i] = buckets[k]
	}
	return out
}

// mismatch says how bad a bucket whose billed count is not its answered count is, and in
// words what the difference is (see reconcileUsage).
func (b *bucketUsage) mismatch() (Severity, string) {
	switch {
	case b.Billed > b.Answered+b.Uncertain:
		return SeverityHigh, fmt.Sprintf("%d more than we sent could explain", b.Billed-b.Answered-b.Uncertain)
	case b.Billed > b.Answered:
		return SeverityLow, fmt.Sprintf("%d retries after uncertain sends were billed twice", b.Billed-b.Answered)
	default:
		return SeverityMedium, fmt.Sprintf("%d answered requests are missing from the report", b.Answered-b.Billed)
	}
}
