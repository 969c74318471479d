package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/recon"
)

// UsageReader reads Anthropic's Messages usage report through its Admin API for the
// reconciler (it implements recon.UsageSource and recon.PromptTokenReport):
// GET {BaseURL}/v1/organizations/usage_report/messages with bucket_width=1m, grouped by model
// and API key, following next_page while has_more says there is more.
//
// The report counts tokens, not requests: each row of a minute, model and key holds the
// prompt tokens read from no cache, written to the cache and read from it, and the output
// tokens. A row's InputTokens are the three prompt counts summed, which is what one request's
// prompt costs whichever of them the cache served, so the reconciler can set a minute's
// billed prompt tokens beside those of the calls Settle sent.
type UsageReader struct {
	// Provider is the provider's name as stored on operations; default "anthropic".
	Provider string
	// BaseURL is the API root without /v1, as for the Client (SETTLE_ANTHROPIC_BASE_URL).
	BaseURL string
	// AdminKey is an Admin API key (sk-ant-admin…, SETTLE_ANTHROPIC_ADMIN_KEY), sent as
	// x-api-key; the key that sends messages cannot read the report.
	AdminKey string
	// APIKeyIDs, when set, keeps only the usage of these keys (apikey_…): the one Settle sends
	// with (SETTLE_ANTHROPIC_API_KEY_ID). Without it every key of the organization counts.
	APIKeyIDs  []string
	HTTPClient *http.Client
	// Limiter spaces the page reads; default 2 per second.
	Limiter *rate.Limiter
}

// UsagePath is the Admin API's Messages usage report under the base URL.
const UsagePath = "/v1/organizations/usage_report/messages"

// usageVersion is the anthropic-version the Admin API is asked with.
const usageVersion = "2023-06-01"

// Name implements recon.UsageSource.
func (u *UsageReader) Name() string {
	if u.Provider == "" {
		return "anthropic"
	}
	return u.Provider
}

// PromptBuckets implements recon.PromptTokenReport: Anthropic's report is compared minute by
// minute, the finest it gives, so that one call billed twice stands out among the others.
func (u *UsageReader) PromptBuckets() time.Duration { return time.Minute }

var _ recon.PromptTokenReport = (*UsageReader)(nil)

// bucketWidths are the report's bucket widths and the most buckets a page may hold.
var bucketWidths = map[time.Duration]struct {
	name  string
	limit int
}{time.Minute: {"1m", 1440}, time.Hour: {"1h", 168}, 24 * time.Hour: {"1d", 31}}

// usagePage is one page of the report. The cache write count comes as an object of its two
// lifetimes; the flat fields are read too, as some descriptions of the report name them so.
type usagePage struct {
	Data []struct {
		StartingAt time.Time `json:"starting_at"`
		Results    []struct {
			APIKeyID            *string `json:"api_key_id"`
			Model               *string `json:"model"`
			UncachedInputTokens int64   `json:"uncached_input_tokens"`
			CacheReadTokens     int64   `json:"cache_read_input_tokens"`
			CacheCreation       struct {
				Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
				Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
			} `json:"cache_creation"`
			CacheCreation5m int64 `json:"cache_creation_5m_input_tokens"`
			CacheCreation1h int64 `json:"cache_creation_1h_input_tokens"`
			OutputTokens    int64 `json:"output_tokens"`
		} `json:"results"`
	} `json:"data"`
	HasMore  bool    `json:"has_more"`
	NextPage *string `json:"next_page"`
}

// Usage implements recon.UsageSource: the report's rows for the whole buckets of width in w,
// one per bucket, key and model, with Requests zero (the report does not count them).
func (u *UsageReader) Usage(ctx context.Context, w recon.Window, width time.Duration) ([]recon.UsageRow, error) {
	bw, ok := bucketWidths[width]
	if !ok {
		return nil, ops.Errorf(ops.EINVALID, "Anthropic's usage buckets are 1m, 1h or 1d, not %s.", width)
	}
	if u.AdminKey == "" {
		return nil, ops.Errorf(ops.EINVALID, "Anthropic's usage report needs an Admin API key (SETTLE_ANTHROPIC_ADMIN_KEY).")
	}
	keep := map[string]bool{}
	for _, k := range u.APIKeyIDs {
		keep[k] = true
	}
	lim := u.Limiter
	if lim == nil {
		lim = rate.NewLimiter(2, 1)
	}
	c := u.HTTPClient
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	// ending_at one bucket past the window: whether the report keeps the bucket that ends
	// exactly at it is not said, and the rows past the window are dropped below.
	q := url.Values{"bucket_width": {bw.name}, "starting_at": {w.From.UTC().Format(time.RFC3339)},
		"ending_at": {w.To.Add(width).UTC().Format(time.RFC3339)}, "group_by[]": {"model", "api_key_id"}, "limit": {strconv.Itoa(bw.limit)}}
	if len(u.APIKeyIDs) > 0 {
		q["api_key_ids[]"] = slices.Clone(u.APIKeyIDs)
	}
	var out []recon.UsageRow
	for n := 0; ; n++ {
		if n >= 1000 {
			return nil, ops.Errorf(ops.EUNAVAILABLE, "Anthropic's usage report did not end after 1000 pages.")
		}
		if err := lim.Wait(ctx); err != nil {
			return nil, err
		}
		p, err := u.get(ctx, c, strings.TrimRight(u.BaseURL, "/")+UsagePath+"?"+q.Encode())
		if err != nil {
			return nil, err
		}
		for _, b := range p.Data {
			start := b.StartingAt.UTC()
			if start.Before(w.From) || !start.Before(w.To) {
				continue
			}
			for _, r := range b.Results {
				key, model := deref(r.APIKeyID), deref(r.Model)
				if len(keep) > 0 && !keep[key] {
					continue
				}
				written := r.CacheCreation.Ephemeral5m + r.CacheCreation.Ephemeral1h + r.CacheCreation5m + r.CacheCreation1h
				out = append(out, recon.UsageRow{Start: start, Width: width, APIKeyID: key, Model: model,
					InputTokens: r.UncachedInputTokens + written + r.CacheReadTokens, OutputTokens: r.OutputTokens})
			}
		}
		if !p.HasMore || p.NextPage == nil || *p.NextPage == "" {
			return out, nil
		}
		q.Set("page", *p.NextPage)
	}
}

func (u *UsageReader) get(ctx context.Context, c *http.Client, target string) (*usagePage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		// The URL may hold a credential: it is not repeated.
		return nil, ops.Errorf(ops.EINVALID, "Anthropic's usage report cannot be asked for at the configured base URL.")
	}
	req.Header.Set("X-Api-Key", u.AdminKey)
	req.Header.Set("Anthropic-Version", usageVersion)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		// The *url.Error names the URL, which may hold a credential: only its cause is kept.
		return nil, &ops.Error{Code: ops.EUNAVAILABLE, Message: "Anthropic's usage report could not be read; try again shortly.", Err: errors.Unwrap(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, &ops.Error{Code: ops.EUNAVAILABLE, Message: "Anthropic's usage report broke off; try again shortly.", Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		var e errorBody
		_ = json.Unmarshal(body, &e)
		msg := fmt.Sprintf("Anthropic's usage report answered %s.", resp.Status)
		if e.Error.Message != "" {
			msg = fmt.Sprintf("Anthropic's usage report answered %s: %s", resp.Status, e.Error.Message)
		}
		return nil, &ops.Error{Code: ops.EUNAVAILABLE, Message: msg, Err: errors.New(string(body[:min(len(body), 500)]))}
	}
	var p usagePage
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, &ops.Error{Code: ops.EUNAVAILABLE, Message: "Anthropic's usage report cannot be read.", Err: err}
	}
	return &p, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
