package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/recon"
)

// UsageReader reads an OpenAI-style usage report over HTTP for the reconciler (it implements
// recon.UsageSource): GET {BaseURL}{Path}?bucket_width=1h&start_time=&end_time= answering
// pages of buckets, each with results per API key and model (num_model_requests). Settle's
// fake LLM serves the same shape at /v1/usage.
//
// OpenAI bills embeddings in a report of their own, apart from completions (which count chat
// completions and responses): the reader reads both, and names the embeddings rows' report
// (recon.UsageReports), so each is compared with the calls of its own routes.
type UsageReader struct {
	// Provider is the provider's name as stored on operations.
	Provider string
	BaseURL  string
	// Path defaults to /v1/usage; OpenAI's is /v1/organization/usage/completions.
	Path string
	// EmbeddingsPath is the embeddings report's; default /v1/organization/usage/embeddings.
	EmbeddingsPath string
	APIKey         string
	// APIKeyIDs, when set, keeps only the usage of these keys: the ones Settle sends with.
	APIKeyIDs  []string
	HTTPClient *http.Client
	// Limiter spaces the page reads; default 5 per second.
	Limiter *rate.Limiter
	// Lookups, when set, reads the provider's stored completions: the reconciler closes the
	// provider's unknown calls from them before it compares usage.
	Lookups *llm.Lookups
}

// Name implements recon.UsageSource.
func (h *UsageReader) Name() string { return h.Provider }

// ReportEmbeddings is the report (recon.UsageRow.Report) of the embeddings usage rows; the
// completions report is the main one, "".
const ReportEmbeddings = "embeddings"

// ReportOf implements recon.UsageReports: embeddings are billed in their report, every other
// route in the completions report.
func (h *UsageReader) ReportOf(route string) string {
	if route == llm.EmbeddingsRoute {
		return ReportEmbeddings
	}
	return ""
}

var _ recon.UsageReports = (*UsageReader)(nil)

// StoredLookups implements recon.StoredLookups.
func (h *UsageReader) StoredLookups() *llm.Lookups { return h.Lookups }

var _ recon.StoredLookups = (*UsageReader)(nil)

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

// Usage implements recon.UsageSource: the rows of the completions report, then those of the
// embeddings report, each read following next_page until it ends.
func (h *UsageReader) Usage(ctx context.Context, w recon.Window, width time.Duration) ([]recon.UsageRow, error) {
	bw := map[time.Duration]string{time.Minute: "1m", time.Hour: "1h", 24 * time.Hour: "1d"}[width]
	if bw == "" {
		return nil, ops.Errorf(ops.EINVALID, "Usage buckets are 1m, 1h or 1d, not %s.", width)
	}
	path := h.Path
	if path == "" {
		path = "/v1/usage"
	}
	out, err := h.report(ctx, "", path, bw, w, width)
	if err != nil {
		return nil, err
	}
	path = h.EmbeddingsPath
	if path == "" {
		path = "/v1/organization/usage/embeddings"
	}
	emb, err := h.report(ctx, ReportEmbeddings, path, bw, w, width)
	if err != nil {
		return nil, err
	}
	return append(out, emb...), nil
}

// report reads one usage report at path, its rows named report.
func (h *UsageReader) report(ctx context.Context, report, path, bw string, w recon.Window, width time.Duration) ([]recon.UsageRow, error) {
	keep := map[string]bool{}
	for _, k := range h.APIKeyIDs {
		keep[k] = true
	}
	lim := h.Limiter
	if lim == nil {
		lim = rate.NewLimiter(5, 1)
	}
	c := h.HTTPClient
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	var out []recon.UsageRow
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
				out = append(out, recon.UsageRow{Report: report, Start: time.Unix(b.StartTime, 0).UTC(), Width: width, APIKeyID: key, Model: model,
					Requests: res.Requests, InputTokens: res.InputTokens, OutputTokens: res.OutputTokens})
			}
		}
		if !p.HasMore || p.NextPage == nil || *p.NextPage == "" {
			return out, nil
		}
		page = *p.NextPage
	}
}

func (h *UsageReader) get(ctx context.Context, c *http.Client, u string) (*usagePage, error) {
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
