package fake

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// usageWidths are the bucket widths of the usage report, with their default and largest
// number of buckets a page.
var usageWidths = map[string]struct {
	width      time.Duration
	def, limit int
}{
	"1m": {time.Minute, 60, 1440},
	"1h": {time.Hour, 24, 168},
	"1d": {24 * time.Hour, 7, 31},
}

// usageGroups are the group_by values the report takes; only model and api_key_id split
// the fake's usage, the others name the one value every message of the fake has.
var usageGroups = map[string]any{"model": nil, "api_key_id": nil, "workspace_id": nil,
	"service_tier": "standard", "context_window": "0-200k"}

// usageReport answers the Admin API's GET /v1/organizations/usage_report/messages: billed
// tokens per time bucket from starting_at (snapped to the bucket width, 1d by default) to
// ending_at or now, every bucket listed, grouped by the group_by[] dimensions given (none:
// one total a bucket), filtered by api_key_ids[] and models[], paged by limit and page.
// A message shows once its report lag has passed.
func (a *Anthropic) usageReport(w http.ResponseWriter, r *http.Request) {
	key, ok := anthropicKey(r)
	switch {
	case !ok:
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return
	case !a.isAdminKey(key):
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key: the Admin API takes an Admin API key (sk-ant-admin...)")
		return
	case r.Header.Get("Anthropic-Version") == "":
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	q := r.URL.Query()
	start, end, width, limit, msg := a.reportWindow(q)
	groups := listParam(q, "group_by")
	for _, g := range groups {
		if _, ok := usageGroups[g]; !ok {
			msg = fmt.Sprintf("group_by: %q is not one of model, api_key_id, workspace_id, service_tier, context_window", g)
		}
	}
	if msg != "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	keys, models := listParam(q, "api_key_ids"), listParam(q, "models")
	now := a.clock()
	var gens []AnthropicGeneration
	for _, g := range a.Generations() {
		if !now.Before(g.reported) && (len(keys) == 0 || slices.Contains(keys, g.APIKeyID)) &&
			(len(models) == 0 || slices.Contains(models, g.Model)) {
			gens = append(gens, g)
		}
	}
	data := []obj{}
	b := start
	for ; b.Before(end) && len(data) < limit; b = b.Add(width) {
		data = append(data, obj{"starting_at": b.Format(time.RFC3339), "ending_at": b.Add(width).Format(time.RFC3339),
			"results": usageResults(gens, b, b.Add(width), groups)})
	}
	var next any
	if b.Before(end) {
		next = "page_" + base64.URLEncoding.EncodeToString([]byte(b.Format(time.RFC3339)))
	}
	writeJSON(w, http.StatusOK, obj{"data": data, "has_more": next != nil, "next_page": next})
}

// reportWindow reads the report's buckets: from starting_at (or the page) snapped to the
// width, to ending_at (buckets that end by then) or now (buckets that start before it),
// at most limit of them. msg says why the query is refused.
func (a *Anthropic) reportWindow(q url.Values) (start, end time.Time, width time.Duration, limit int, msg string) {
	wd, ok := usageWidths[firstOf(q.Get("bucket_width"), "1d")]
	if !ok {
		return start, end, 0, 0, "bucket_width: Input should be '1d', '1h' or '1m'"
	}
	width, limit = wd.width, wd.def
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > wd.limit {
			return start, end, 0, 0, fmt.Sprintf("limit: Input should be from 1 to %d for this bucket_width", wd.limit)
		}
		limit = n
	}
	from := q.Get("starting_at")
	if p, ok := strings.CutPrefix(q.Get("page"), "page_"); ok {
		b, _ := base64.URLEncoding.DecodeString(p)
		from = string(b)
	}
	start, err := time.Parse(time.RFC3339, from)
	if err != nil {
		return start, end, 0, 0, "starting_at: Input should be an RFC 3339 timestamp"
	}
	start = start.UTC().Truncate(width)
	end = a.clock().UTC()
	if v := q.Get("ending_at"); v != "" {
		if end, err = time.Parse(time.RFC3339, v); err != nil {
			return start, end, 0, 0, "ending_at: Input should be an RFC 3339 timestamp"
		}
		// Only buckets that end by ending_at are listed.
		end = end.UTC().Add(-width + 1)
	}
	return start, end, width, limit, ""
}

// usageResults sums the generations billed in [from, to), one result per group.
func usageResults(gens []AnthropicGeneration, from, to time.Time, groups []string) []obj {
	byModel, byKey := slices.Contains(groups, "model"), slices.Contains(groups, "api_key_id")
	type group struct{ key, model string }
	sums := map[group]*AnthropicGeneration{}
	for _, g := range gens {
		if g.Created.Before(from) || !g.Created.Before(to) {
			continue
		}
		k := group{}
		if byKey {
			k.key = g.APIKeyID
		}
		if byModel {
			k.model = g.Model
		}
		s := sums[k]
		if s == nil {
			s = &AnthropicGeneration{}
			sums[k] = s
		}
		s.InputTokens += g.InputTokens
		s.CacheCreationInputTokens += g.CacheCreationInputTokens
		s.CacheCreation1hInputTokens += g.CacheCreation1hInputTokens
		s.CacheReadInputTokens += g.CacheReadInputTokens
		s.OutputTokens += g.OutputTokens
	}
	keys := make([]group, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].key < keys[j].key || keys[i].key == keys[j].key && keys[i].model < keys[j].model
	})
	results := []obj{}
	for _, k := range keys {
		s := sums[k]
		res := obj{"uncached_input_tokens": s.InputTokens, "cache_read_input_tokens": s.CacheReadInputTokens,
			"cache_creation": obj{"ephemeral_5m_input_tokens": s.CacheCreationInputTokens - s.CacheCreation1hInputTokens,
				"ephemeral_1h_input_tokens": s.CacheCreation1hInputTokens},
			"output_tokens": s.OutputTokens, "server_tool_use": obj{"web_search_requests": 0},
			"model": nullable(k.model), "api_key_id": nullable(k.key)}
		for g, v := range usageGroups {
			if _, set := res[g]; !set {
				res[g] = nil
				if slices.Contains(groups, g) {
					res[g] = v
				}
			}
		}
		results = append(results, res)
	}
	return results
}

// listParam reads an array query parameter written as name[]=a&name[]=b, name=a&name=b or
// name=a,b.
func listParam(q url.Values, name string) []string {
	var out []string
	for _, v := range append(q[name+"[]"], q[name]...) {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
