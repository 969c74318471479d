package views_test

import (
	"testing"

	"golang.org/x/net/html"

	"github.com/settle-dev/settle/views"
)

func jobsPage() views.OpDetailPage {
	m := detailPage()
	m.Op.Kind = "llm_job"
	cells := []views.JobCheckpointCell{
		{Stage: "uploaded", Reached: true, InputHash: "abcdef012345…", InputHashFull: "abcdef0123456789", CodeVersion: "upload-1", Status: "ok", Attempt: "0", Result: `{"bytes":10}`},
		{Stage: "text_extracted", Reached: true, InputHash: "111", InputHashFull: "111", CodeVersion: "extract-1", Status: "ok", Attempt: "0"},
		{Stage: "chunks_ready", Reached: true, InputHash: "222", InputHashFull: "222", CodeVersion: "chunk-1", Status: "ok", Attempt: "0"},
		{Stage: "llm_done", Reached: true, InputHash: "333", InputHashFull: "333", CodeVersion: "llm-1", Status: "unknown", Attempt: "2", Result: `{"summary":"<script>alert(1)</script>"}`},
		{Stage: "validated"},
		{Stage: "published"},
	}
	m.Jobs = &views.OpJobs{Rows: []views.OpJobRow{{ID: "job-1", Tenant: "docs", Status: "unknown", IdempotencyKey: "<k1>",
		Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast", DedupKey: "d3d", Checkpoints: cells}},
		More: "Showing the first 100 jobs; more use this operation."}
	return m
}

func TestOpDetailShowsJobsAndCheckpointsInOrder(t *testing.T) {
	doc := render(t, views.OpDetail(jobsPage()))
	one(t, doc, "op-jobs")
	row := one(t, doc, "job-row")
	if attr(row, "data-job-id") != "job-1" {
		t.Errorf("row job id %q", attr(row, "data-job-id"))
	}
	for id, want := range map[string]string{"job-id": "job-1", "job-status": "unknown", "job-tenant": "docs",
		"job-idempotency-key": "<k1>", "job-prompt-version": "v1", "job-model-profile": "fast", "job-dedup-key": "d3d",
		"jobs-more": "Showing the first 100 jobs; more use this operation."} {
		if got := text(one(t, doc, id)); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	cps := byTestID(doc, "job-checkpoint")
	want := []string{"uploaded", "text_extracted", "chunks_ready", "llm_done", "validated", "published"}
	if len(cps) != len(want) {
		t.Fatalf("%d checkpoint rows", len(cps))
	}
	for i, c := range cps {
		if attr(c, "data-stage") != want[i] {
			t.Errorf("row %d is %q, want %q", i, attr(c, "data-stage"), want[i])
		}
	}
	hash := byTestID(doc, "checkpoint-input-hash")[0]
	if text(hash) != "abcdef012345…" || attr(hash, "title") != "abcdef0123456789" {
		t.Errorf("input hash %q title %q", text(hash), attr(hash, "title"))
	}
	for id, want := range map[int]map[string]string{
		0: {"checkpoint-code-version": "upload-1", "checkpoint-status": "ok", "checkpoint-attempt": "0", "checkpoint-result": `{"bytes":10}`},
		3: {"checkpoint-code-version": "llm-1", "checkpoint-status": "unknown", "checkpoint-attempt": "2", "checkpoint-result": `{"summary":"<script>alert(1)</script>"}`},
	} {
		for tid, w := range want {
			if got := text(byTestID(doc, tid)[id]); got != w {
				t.Errorf("row %d %s = %q, want %q", id, tid, got, w)
			}
		}
	}
	if got := len(byTestID(doc, "checkpoint-pending")); got != 2 {
		t.Errorf("%d pending stages, want 2", got)
	}
	// The result and the key came through as text, not markup.
	if n := countTag(one(t, doc, "op-jobs"), "script"); n != 0 {
		t.Errorf("%d script elements: a value was not escaped", n)
	}
}

func TestOpDetailJobsForSupportAndWhenEmpty(t *testing.T) {
	m := jobsPage()
	m.Viewer = views.Viewer{Email: "s@x", Role: "support"}
	doc := render(t, views.OpDetail(m))
	one(t, doc, "job-row")
	if n := byTestID(doc, "op-actions"); len(n) != 0 {
		t.Error("support sees actions")
	}

	m.Jobs = &views.OpJobs{}
	doc = render(t, views.OpDetail(m))
	one(t, doc, "jobs-empty")
	m.Jobs = &views.OpJobs{Unavailable: "not configured"}
	doc = render(t, views.OpDetail(m))
	if got := text(one(t, doc, "jobs-unavailable")); got != "not configured" {
		t.Errorf("unavailable = %q", got)
	}

	m.Jobs = nil
	doc = render(t, views.OpDetail(m))
	if n := byTestID(doc, "op-jobs"); len(n) != 0 {
		t.Error("the jobs section shows for an operation without jobs")
	}
}

// countTag counts the elements named tag under n.
func countTag(n *html.Node, tag string) int {
	c := 0
	if n.Type == html.ElementNode && n.Data == tag {
		c++
	}
	for k := n.FirstChild; k != nil; k = k.NextSibling {
		c += countTag(k, tag)
	}
	return c
}
