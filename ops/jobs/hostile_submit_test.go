package jobs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/jobs"
)

// A document whose text holds no word (spaces, tabs, line breaks, no-break spaces) is
// refused when it is submitted: the pipeline would normalise it to nothing and pay the
// provider for a summary of an empty message. Nothing is recorded and nothing is sent.
func TestADocumentWithoutAWordIsRefusedBeforeAnythingIsPaid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for i, text := range []string{" ", "\n\n\t \r\n", "\u00a0\u2003\u3000", "\u0085\u2028\u2029"} {
		_, err := e.svc.Submit(ctx, jobs.Submission{TenantID: e.tenant, IdempotencyKey: "blank-" + string(rune('a'+i)),
			Document: jobs.Document{Text: text}, Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast"})
		if ops.ErrorCode(err) != ops.EINVALID || ops.ErrorReason(err) != jobs.ReasonBadDocument {
			t.Errorf("document %q: %v, want %s refused", text, err, jobs.ReasonBadDocument)
		}
	}
	e.drain(t, e.worker("w1", false))
	if n := e.count(t, `SELECT count(*) FROM jobs`); n != 0 {
		t.Errorf("%d jobs recorded for documents without a word", n)
	}
	if gens := e.fake.Generations(); len(gens) != 0 {
		t.Fatalf("%d generations billed for documents without a word", len(gens))
	}
}

// blankSource serves every reference as a document without a word.
type blankSource struct{}

func (blankSource) Fetch(context.Context, string) ([]byte, error) { return []byte(blank), nil }

const blank = " \n\n\t "

// A document sent by hash and reference whose bytes hold no word is failed by the worker
// that fetches it, before its generation is sent: nothing is paid for it.
func TestADocumentFetchedWithoutAWordFailsBeforeItsGeneration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sum := sha256.Sum256([]byte(blank))
	s, err := e.svc.Submit(context.Background(), jobs.Submission{TenantID: e.tenant, IdempotencyKey: "blank-ref",
		Document: jobs.Document{Hash: hex.EncodeToString(sum[:]), Ref: "s3://bucket/blank.txt"},
		Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	w := e.worker("w1", false)
	w.Documents = blankSource{}
	e.drain(t, w)
	if got := e.job(t, s.Job.ID); got.Status != jobs.StatusFailed || got.ErrorCode != jobs.ReasonBadDocument || got.OperationID != "" {
		t.Fatalf("job %s %s on operation %q, want failed as %s with no generation", got.Status, got.ErrorCode, got.OperationID, jobs.ReasonBadDocument)
	}
	if gens := e.fake.Generations(); len(gens) != 0 {
		t.Fatalf("%d generations billed for a document without a word", len(gens))
	}
}

// A job's Idempotency-Key sent again with another document is refused as key reuse and is
// not counted as a repeat of the job: its duplicate posts are the repeats of its own intent,
// counted facts (ops rule 8), and the refused request changes nothing of the job.
func TestAKeyReusedForAnotherDocumentIsNotCountedAsARepeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	first := e.submit(t, e.tenant, "reused", docA, "v1")
	for range 3 {
		_, err := e.svc.Submit(ctx, jobs.Submission{TenantID: e.tenant, IdempotencyKey: "reused",
			Document: jobs.Document{Text: docB}, Pipeline: "summarise", PromptVersion: "v1", ModelProfile: "fast"})
		if ops.ErrorReason(err) != jobs.ReasonKeyReused {
			t.Fatalf("same key, another document: %v, want %s", err, jobs.ReasonKeyReused)
		}
	}
	again := e.submit(t, e.tenant, "reused", docA, "v1")
	if again.ID != first.ID || again.DuplicatePosts != 1 {
		t.Fatalf("the repeat of job %s: job %s with %d duplicate posts, want the same job with the one repeat", first.ID, again.ID, again.DuplicatePosts)
	}
	if got := e.job(t, first.ID); got.DuplicatePosts != 1 || got.DocumentHash != first.DocumentHash || got.RequestFingerprint != first.RequestFingerprint {
		t.Fatalf("job after the refused reuses: %d duplicate posts, document %s", got.DuplicatePosts, got.DocumentHash)
	}
}
