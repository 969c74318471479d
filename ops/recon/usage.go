package recon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/settle-dev/settle/ops"
)

// bucketUsage is one time bucket of the LLM comparison: what the provider billed against
// what we sent.
type bucketUsage struct {
	Start time.Time `json:"start"`
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
// LLM providers take no idempotency key, so every answered attempt is billed once, and an
// attempt whose outcome is unknown (a timeout) may have been billed too. A bucket is in
// order when billed equals answered. Billed above answered but within answered plus
// uncertain are retries after uncertain sends that the provider billed: duplicates, money
// lost (low severity; the retry policy allowed them). Billed above that are requests we
// never sent (high). Billed below answered means the report is missing requests (medium).
func (r *Reconciler) reconcileUsage(ctx context.Context, src UsageSource, w ops.Window, rep *Report) error {
	provider := src.Name()
	width := orDefault(r.UsageWidth, DefaultUsageWidth)
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
	cw := ops.Window{From: from, To: to}
	rows, err := src.Usage(ctx, cw, width)
	if err != nil {
		return fmt.Errorf("read %s usage: %w", provider, err)
	}
	rep.UsageRows = len(rows)
	if rep.NewUsageRows, err = r.Store.RecordUsage(ctx, provider, rows, now); err != nil {
		return err
	}
	sent, err := r.Store.SentToLLM(ctx, provider, cw, width)
	if err != nil {
		return err
	}
	buckets := map[int64]*bucketUsage{}
	get := func(t time.Time) *bucketUsage {
		k := t.Truncate(width).Unix()
		if buckets[k] == nil {
			buckets[k] = &bucketUsage{Start: time.Unix(k, 0).UTC(), ByModel: map[string]int64{}, SentModel: map[string]int64{}}
		}
		return buckets[k]
	}
	for _, u := range rows {
		if u.Start.Before(from) || !u.Start.Before(to) {
			continue
		}
		b := get(u.Start)
		b.Billed += u.Requests
		b.ByModel[u.Model] += u.Requests
	}
	for _, s := range sent {
		b := get(s.Start)
		b.Answered += s.OK
		b.Uncertain += s.Uncertain
		b.Sent += s.Sent
		b.SentModel[s.Model] += s.Sent
	}
	keys := make([]int64, 0, len(buckets))
	for k := range buckets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		b := buckets[k]
		rep.Buckets++
		rep.Billed += b.Billed
		rep.Answered += b.Answered
		if b.Billed == b.Answered {
			continue
		}
		rep.UsageMismatch++
		var sev ops.Severity
		var what string
		switch {
		case b.Billed > b.Answered+b.Uncertain:
			sev = ops.SeverityHigh
			what = fmt.Sprintf("%d more than we sent could explain", b.Billed-b.Answered-b.Uncertain)
		case b.Billed > b.Answered:
			sev = ops.SeverityLow
			what = fmt.Sprintf("%d retries after uncertain sends were billed twice", b.Billed-b.Answered)
		default:
			sev = ops.SeverityMedium
			what = fmt.Sprintf("%d answered requests are missing from the report", b.Answered-b.Billed)
		}
		body, _ := json.Marshal(b)
		if err := r.record(ctx, rep, ops.Finding{Kind: ops.ExceptionUsageMismatch, Provider: provider,
			Ref:      fmt.Sprintf("%s/%s", b.Start.Format(time.RFC3339), width),
			Severity: sev, Details: body, Actor: r.actor(provider), At: now,
			Summary: fmt.Sprintf("%s billed %d requests in the %s from %s; we got %d answers and %d uncertain attempts: %s.",
				provider, b.Billed, width, b.Start.Format("2006-01-02 15:04 MST"), b.Answered, b.Uncertain, what)}); err != nil {
			return err
		}
	}
	return nil
}

// HTTPUsage reads an OpenAI-style usage report over HTTP: GET {BaseURL}{Path}?bucket_width=
// 1h&start_time=&end_time= answering pages of buckets, each with results per API key and
// model (num_model_requests). Settle's fake LLM serves the same shape at /v1/usage.
type HTTPUsage struct {
	// Provider is the provider's name as stored on operations.
	Provider string
	BaseURL  string
	// Path defaults to /v1/usage; OpenAI's is /v1/organization/usage/completions.
	Path   string
	APIKey string
	// APIKeyIDs, when set, keeps only the usage of these keys: the ones Settle sends with.
	APIKeyIDs []string
	Client    *http.Client
	// Limiter spaces the page reads; default 5 per second.
	Limiter *rate.Limiter
}

// Name implements UsageSource.
func (h *HTTPUsage) Name() string { return h.Provider }

type usagePage struct {
	Data []struct {
		StartTime int64 `json:"start_time"`
		EndTime   int64 `json:"end_time"`
		Results   []struct {
			APIKeyID     *string `json:"api_key_id"`
			Model        *string `json:"model"`
			Requests     int64   `json:"num_model_requests"`
			InputTokens  int64   `json:"input_tokens"`
			OutputTokens int64   `json:"output_tokens"`
		} `json:"results"`
	} `json:"data"`
	HasMore  bool    `json:"has_more"`
	NextPage *string `json:"next_page"`
}

// Usage implements UsageSource, following next_page until the report ends.
func (h *HTTPUsage) Usage(ctx context.Context, w ops.Window, width time.Duration) ([]ops.UsageRow, error) {
	bw := map[time.Duration]string{time.Minute: "1m", time.Hour: "1h", 24 * time.Hour: "1d"}[width]
	if bw == "" {
		return nil, ops.Errorf(ops.EINVALID, "Usage buckets are 1m, 1h or 1d, not %s.", width)
	}
	keep := map[string]bool{}
	for _, k := range h.APIKeyIDs {
		keep[k] = true
	}
	lim := h.Limiter
	if lim == nil {
		lim = rate.NewLimiter(5, 1)
	}
	c := h.Client
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	path := h.Path
	if path == "" {
		path = "/v1/usage"
	}
	var out []ops.UsageRow
	page := ""
	for n := 0; ; n++ {
		if n >= 1000 {
			return nil, ops.Errorf(ops.EUNAVAILABLE, "The %s usage report did not end after 1000 pages.", h.Provider)
		}
		if err := lim.Wait(ctx); err != nil {
			return nil, err
		}
		q := url.Values{"bucket_width": {bw}, "start_time": {strconv.FormatInt(w.From.Unix(), 10)},
			"end_time": {strconv.FormatInt(w.To.Unix(), 10)}, "limit": {"31"}}
		if page != "" {
			q.Set("page", page)
		}
		p, err := h.get(ctx, c, h.BaseURL+path+"?"+q.Encode())
		if err != nil {
			return nil, err
		}
		for _, b := range p.Data {
			for _, res := range b.Results {
				key, model := deref(res.APIKeyID), deref(res.Model)
				if len(keep) > 0 && !keep[key] {
					continue
				}
				out = append(out, ops.UsageRow{Start: time.Unix(b.StartTime, 0).UTC(), Width: width, APIKeyID: key, Model: model,
					Requests: res.Requests, InputTokens: res.InputTokens, OutputTokens: res.OutputTokens})
			}
		}
		if !p.HasMore || p.NextPage == nil || *p.NextPage == "" {
			return out, nil
		}
		page = *p.NextPage
	}
}

func (h *HTTPUsage) get(ctx context.Context, c *http.Client, u string) (*usagePage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("build usage request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+h.APIKey)
	resp, err := c.Do(req)
	if err != nil {
		return nil, &ops.Error{Code: ops.EUNAVAILABLE, Message: fmt.Sprintf("The %s usage report could not be read; try again shortly.", h.Provider), Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, &ops.Error{Code: ops.EUNAVAILABLE, Message: fmt.Sprintf("The %s usage report broke off; try again shortly.", h.Provider), Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &ops.Error{Code: ops.EUNAVAILABLE, Message: fmt.Sprintf("The %s usage report answered %s.", h.Provider, resp.Status),
			Err: errors.New(string(body[:min(len(body), 500)]))}
	}
	var p usagePage
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, &ops.Error{Code: ops.EUNAVAILABLE, Message: fmt.Sprintf("The %s usage report cannot be read.", h.Provider), Err: err}
	}
	return &p, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
