package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/openai"
	"github.com/settle-dev/settle/ops/recon"
)

// TestUsageReaderReadsEveryPageOfTheReport: every page of the completions report, then the
// embeddings report, its rows named as its own.
func TestUsageReaderReadsEveryPageOfTheReport(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk_admin" || r.URL.Query().Get("bucket_width") != "1h" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/v1/usage":
		case "/v1/organization/usage/embeddings":
			_ = json.NewEncoder(w).Encode(map[string]any{"object": "page", "has_more": false, "data": []any{
				map[string]any{"start_time": start.Unix(), "end_time": start.Add(time.Hour).Unix(), "results": []any{
					map[string]any{"api_key_id": "key_a", "model": "e1", "num_model_requests": 4, "input_tokens": 40},
				}}}})
			return
		default:
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		page := map[string]any{"object": "page", "has_more": true, "next_page": "p2", "data": []any{
			map[string]any{"start_time": start.Unix(), "end_time": start.Add(time.Hour).Unix(), "results": []any{
				map[string]any{"api_key_id": "key_a", "model": "m1", "num_model_requests": 3, "input_tokens": 30, "output_tokens": 60},
				map[string]any{"api_key_id": "key_other", "model": "m1", "num_model_requests": 9},
			}}}}
		if r.URL.Query().Get("page") == "p2" {
			page = map[string]any{"object": "page", "has_more": false, "next_page": nil, "data": []any{
				map[string]any{"start_time": start.Add(time.Hour).Unix(), "end_time": start.Add(2 * time.Hour).Unix(), "results": []any{
					map[string]any{"api_key_id": "key_a", "model": "m2", "num_model_requests": 2},
				}}}}
		}
		_ = json.NewEncoder(w).Encode(page)
	}))
	defer srv.Close()
	u := &openai.UsageReader{Provider: "fakellm", BaseURL: srv.URL, APIKey: "sk_admin", APIKeyIDs: []string{"key_a"}}
	rows, err := u.Usage(context.Background(), recon.Window{From: start, To: start.Add(2 * time.Hour)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].Requests != 3 || rows[0].InputTokens != 30 || rows[1].Model != "m2" || !rows[1].Start.Equal(start.Add(time.Hour)) ||
		rows[0].Report != "" || rows[2].Report != openai.ReportEmbeddings || rows[2].Model != "e1" || rows[2].Requests != 4 {
		t.Fatalf("rows %+v", rows)
	}
	bad := &openai.UsageReader{Provider: "fakellm", BaseURL: srv.URL, APIKey: "wrong"}
	if _, err := bad.Usage(context.Background(), recon.Window{From: start, To: start.Add(time.Hour)}, time.Hour); ops.ErrorCode(err) != ops.EUNAVAILABLE {
		t.Fatalf("a refused report: %v, want unavailable", err)
	}
}
