package fake

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"
)

// usage answers GET /v1/usage (and the OpenAI path /v1/organization/usage/completions):
// billed requests per time bucket, grouped by API key and model. Chat completions and
// responses count there, embeddings at /v1/organization/usage/embeddings. Parameters:
// bucket (or bucket_width) 1m, 1h or 1d; start and end (or start_time, end_time) in Unix
// seconds; an optional api_key_id to see one key. Every bucket from start to end is
// listed, empty or not.
func (l *LLM) usage(w http.ResponseWriter, r *http.Request) {
	if _, ok := bearer(r); !ok {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "You didn't provide an API key.")
		return
	}
	q := r.URL.Query()
	width := map[string]time.Duration{"1m": time.Minute, "1h": time.Hour, "1d": 24 * time.Hour}[firstOf(q.Get("bucket"), q.Get("bucket_width"), "1d")]
	if width == 0 {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "bucket must be 1m, 1h or 1d.")
		return
	}
	gens := l.usageGenerations(r.URL.Path)
	now := l.clock()
	start, err1 := unixParam(firstOf(q.Get("start"), q.Get("start_time")), time.Time{})
	end, err2 := unixParam(firstOf(q.Get("end"), q.Get("end_time")), now.Add(width))
	if err := errors.Join(err1, err2); err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	if start.IsZero() {
		start = now
		for _, g := range gens {
			if g.Created.Before(start) {
				start = g.Created
			}
		}
	}
	start = start.Truncate(width)
	if !end.After(start) {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "end must be after start.")
		return
	}
	if end.Sub(start)/width > 1440 {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "At most 1440 buckets per page.")
		return
	}
	keyFilter := q.Get("api_key_id")
	type group struct{ key, model string }
	type totals struct{ in, out, cached, n int }
	var data []obj
	for b := start; b.Before(end); b = b.Add(width) {
		sums := map[group]*totals{}
		for _, g := range gens {
			if g.Created.Before(b) || !g.Created.Before(b.Add(width)) || (keyFilter != "" && g.APIKeyID != keyFilter) {
				continue
			}
			k := group{g.APIKeyID, g.Model}
			if sums[k] == nil {
				sums[k] = &totals{}
			}
			t := sums[k]
			t.in, t.out, t.cached, t.n = t.in+g.PromptTokens, t.out+g.CompletionTokens, t.cached+g.CachedTokens, t.n+1
		}
		keys := make([]group, 0, len(sums))
		for k := range sums {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			return keys[i].key < keys[j].key || keys[i].key == keys[j].key && keys[i].model < keys[j].model
		})
		results := make([]obj, 0, len(keys))
		for _, k := range keys {
			t := sums[k]
			results = append(results, obj{"object": usageResultObject(r.URL.Path), "input_tokens": t.in,
				"output_tokens": t.out, "input_cached_tokens": t.cached, "num_model_requests": t.n,
				"api_key_id": k.key, "model": k.model, "project_id": nil, "user_id": nil, "batch": nil})
		}
		data = append(data, obj{"object": "bucket", "start_time": b.Unix(), "end_time": b.Add(width).Unix(), "results": results})
	}
	if data == nil {
		data = []obj{}
	}
	writeJSON(w, http.StatusOK, obj{"object": "page", "data": data, "has_more": false, "next_page": nil})
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func unixParam(v string, def time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a Unix time in seconds", v)
	}
	return time.Unix(n, 0).UTC(), nil
}
