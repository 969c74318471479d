package demo

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"time"
)

// demoDocuments are the documents the demo's pipeline summarises; a few of them come back
// under new keys, so their generations are shared.
var demoDocuments = []string{
	"Order 4417: the customer asked for one refund of $38.00; the agent's tool call timed out and the agent tried again.",
	"Ticket 912: the parcel for order 5120 arrived damaged. The customer sent two photos and asks for a replacement, not a refund.",
	"Call notes: the customer was charged twice for the annual plan after a double click on the checkout button.",
	"Chat 903: the voucher promised last week was never sent; the customer is polite but asks for a manager.",
	"Ticket 1187: delivery is late by six days; the courier's tracking page has not changed since Monday.",
	"Email: the customer wants to close the account and asks that all stored cards be removed.",
}

// pipeline plays a document pipeline against the running demo through POST /api/v1/jobs:
// each document and prompt version is one intent with its own Idempotency-Key; some are
// posted twice (a retrying client), some resubmitted under a new key (another pipeline run
// of the same input, answered from the stored generation), and the prompt moves from v1 to
// v2 halfway, which is a new computation. The fake LLM's faults leave some generations with
// an unknown outcome, which wait in the Unknown queue.
func (d *Traffic) pipeline(ctx context.Context) {
	rnd := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 17))
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	run := time.Now().Unix()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		version := "v1"
		if n >= 20 {
			version = "v2"
		}
		doc := demoDocuments[rnd.IntN(len(demoDocuments))]
		profile := "fast"
		if rnd.IntN(4) == 0 {
			profile = "quality"
		}
		key := fmt.Sprintf("pipeline-%d-%d", run, n)
		body := map[string]any{"document": map[string]string{"text": doc}, "pipeline": "summarise",
			"prompt_version": version, "model_profile": profile, "request_ref": fmt.Sprintf("run-%d/%d", run, n)}
		ans, err := d.submitJob(ctx, key, body)
		if err != nil {
			d.log.Debug("demo pipeline", "err", err)
			continue
		}
		if rnd.IntN(4) == 0 {
			// The client did not hear the answer and posts again with the same key.
			if again, err := d.submitJob(ctx, key, body); err == nil && again["job_id"] != ans["job_id"] {
				d.log.Warn("demo pipeline: a repeated POST got another job", "first", ans["job_id"], "again", again["job_id"])
			}
		}
	}
}

// submitJob posts one job like a pipeline client would.
func (d *Traffic) submitJob(ctx context.Context, key string, body map[string]any) (map[string]any, error) {
	out, resp, err := d.post(ctx, "/api/v1/jobs", key, body, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return out, fmt.Errorf("POST /api/v1/jobs: %s: %v", resp.Status, out["detail"])
	}
	return out, nil
}
