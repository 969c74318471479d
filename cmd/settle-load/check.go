package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/stripe"
)

// ledgerOp is an operation as the ledger holds it at the end of the run.
type ledgerOp struct {
	id, kind   string
	status     ops.Status
	providerID string // provider_ref: the refund or completion it succeeded with
	leased     bool   // a lease or a key retention names who settles it
	attempts   []ops.Attempt
}

// checked is what the ledger and the providers hold against what the client was told.
type checked struct {
	opsByStatus  map[string]int
	jobsByStatus map[string]int
	// Operations lost, by why: an answer the ledger does not hold, an answer it
	// contradicts, a charge at a provider naming no operation, an operation or job that
	// nobody will settle.
	lostWhy map[string][]string
	// Double charges, by provider: more than one refund for one payment (one intent) at
	// Stripe; more generations for one operation than one plus its resends after an
	// uncertain attempt at the LLM.
	doubleWhy map[string][]string
	// possibleDuplicates are the LLM generations billed again after an uncertain attempt,
	// which the interactive policy accepts and the ledger counts.
	possibleDuplicates int
	refundsAtStripe    int
	generations        int
	reconDoubles       int // double_charge exceptions the reconciler raised
}

func (c *checked) lost() int    { return total(c.lostWhy) }
func (c *checked) doubles() int { return total(c.doubleWhy) }

func total(m map[string][]string) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// check reads the ledger and the fakes' records after the run and compares them with what
// the client was answered. The definitions are those of the chaos simulation's invariants.
func check(ctx context.Context, w *world, d *driver) (*checked, error) {
	c := &checked{opsByStatus: map[string]int{}, jobsByStatus: map[string]int{}, lostWhy: map[string][]string{}, doubleWhy: map[string][]string{}}
	lost := func(why, what string) { c.lostWhy[why] = append(c.lostWhy[why], what) }
	byID, err := readOps(ctx, w)
	if err != nil {
		return nil, err
	}
	jobsLeft, err := c.readJobs(ctx, w, d, lost)
	if err != nil {
		return nil, err
	}
	for _, o := range byID {
		c.opsByStatus[string(o.status)]++
		if o.status == ops.StatusInProgress && !o.leased && !jobsLeft[o.id] {
			lost("in progress with no lease, no key retention and no job", o.kind+" "+o.id)
		}
	}
	c.checkAnswers(d, byID, w, lost)
	c.checkStripe(w, byID, lost)
	if err := c.explainStripe(ctx, w); err != nil {
		return nil, err
	}
	c.checkLLM(w, byID, lost)
	err = w.db.Pool.QueryRow(ctx, `SELECT count(*) FROM recon_exceptions WHERE kind = 'double_charge'`).Scan(&c.reconDoubles)
	return c, err
}

// readOps reads every operation and its attempts.
func readOps(ctx context.Context, w *world) (map[string]*ledgerOp, error) {
	byID := map[string]*ledgerOp{}
	rows, err := w.db.Pool.Query(ctx, `SELECT id::text, kind, status, provider_ref,
	coalesce(lease_until, retry_until) IS NOT NULL FROM operations`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		o := &ledgerOp{}
		if err := rows.Scan(&o.id, &o.kind, &o.status, &o.providerID, &o.leased); err != nil {
			rows.Close()
			return nil, err
		}
		byID[o.id] = o
	}
	rows.Close()
	rows, err = w.db.Pool.Query(ctx, `SELECT operation_id::text, n, finished_at, coalesce(outcome, '') FROM attempts ORDER BY operation_id, n`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var a ops.Attempt
		var finished *time.Time
		if err := rows.Scan(&a.OperationID, &a.N, &finished, &a.Outcome); err != nil {
			return nil, err
		}
		a.FinishedAt = finished
		if o := byID[a.OperationID]; o != nil {
			o.attempts = append(o.attempts, a)
		}
	}
	return byID, rows.Err()
}

// readJobs counts the jobs by status, notes the jobs nobody will run, and returns the
// operations that a queued or running job will settle.
func (c *checked) readJobs(ctx context.Context, w *world, d *driver, lost func(string, string)) (map[string]bool, error) {
	rows, err := w.db.Pool.Query(ctx, `SELECT j.id::text, j.status, coalesce(j.operation_id::text, ''), j.lease_until IS NOT NULL,
	coalesce(o.status, '') FROM jobs j LEFT JOIN operations o ON o.id = j.operation_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	left, seen := map[string]bool{}, map[string]bool{}
	for rows.Next() {
		var id, status, opID, opStatus string
		var leased bool
		if err := rows.Scan(&id, &status, &opID, &leased, &opStatus); err != nil {
			return nil, err
		}
		seen[id] = true
		c.jobsByStatus[status]++
		switch {
		case status == "unknown" && ops.Status(opStatus).Final():
			lost("job waits unknown on a closed operation", id)
		case status == "running" && !leased:
			lost("job running without a lease", id)
		}
		if status == "queued" || status == "running" {
			left[opID] = true
		}
	}
	for _, j := range d.jobs {
		if !seen[j.jobID] {
			lost("answered 2xx, not in the ledger", "job "+j.jobID+" of key "+j.key)
		}
	}
	return left, rows.Err()
}

// checkAnswers: every 2xx answer names an operation the ledger holds, in a state that does
// not contradict the answer.
func (c *checked) checkAnswers(d *driver, byID map[string]*ledgerOp, w *world, lost func(string, string)) {
	for _, r := range d.refunds {
		o := byID[r.opID]
		switch {
		case o == nil:
			lost("answered 2xx, not in the ledger", "refund of "+r.order+" answered "+r.status+" with operation "+r.opID)
		case (r.status == "refunded" || r.status == "refund_pending") && (o.status != ops.StatusSucceeded || o.providerID != r.refundID):
			lost("answered done, the ledger says otherwise", fmt.Sprintf("refund %s answered %s %s, ledger %s %s", r.order, r.status, r.refundID, o.status, o.providerID))
		}
	}
	for _, ch := range d.chats {
		o := byID[ch.opID]
		switch {
		case o == nil:
			lost("answered 2xx, not in the ledger", "chat "+ch.key+" with operation "+ch.opID)
		case o.status != ops.StatusSucceeded || o.providerID != ch.completionID:
			lost("answered done, the ledger says otherwise", fmt.Sprintf("chat %s answered %s, ledger %s %s", ch.key, ch.completionID, o.status, o.providerID))
		}
	}
}

// checkStripe: every refund at Stripe names an operation, and no payment (one intent each)
// was refunded twice.
func (c *checked) checkStripe(w *world, byID map[string]*ledgerOp, lost func(string, string)) {
	perPayment := map[string][]string{}
	for _, rf := range w.stripe.Refunds() {
		if rf.Status == "failed" || rf.Status == "canceled" {
			continue
		}
		c.refundsAtStripe++
		id := rf.Metadata[stripe.MetadataKey]
		if byID[id] == nil {
			lost("charged at a provider for no operation", "Stripe refund "+rf.ID+" names "+id)
		}
		perPayment[rf.PaymentIntent] = append(perPayment[rf.PaymentIntent], rf.ID+" of operation "+id)
	}
	for _, p := range sortedKeys(perPayment) {
		if refs := perPayment[p]; len(refs) > 1 {
			c.doubleWhy["stripe"] = append(c.doubleWhy["stripe"], fmt.Sprintf("payment %s refunded %d times: %s", p, len(refs), strings.Join(refs, ", ")))
		}
	}
}

// explainStripe adds to the first payments refunded twice the ledger's operations of it, for
// the report to show what the ledger made of the intent.
func (c *checked) explainStripe(ctx context.Context, w *world) error {
	for i, line := range first(c.doubleWhy["stripe"], 3) {
		payment, _, _ := strings.Cut(strings.TrimPrefix(line, "payment "), " ")
		rows, err := w.db.Pool.Query(ctx, `SELECT id::text, status, intent_key, to_char(created_at, 'HH24:MI:SS.MS') FROM operations
WHERE payment_ref = $1 ORDER BY created_at`, payment)
		if err != nil {
			return err
		}
		var ops []string
		for rows.Next() {
			var id, status, intent, created string
			if err := rows.Scan(&id, &status, &intent, &created); err != nil {
				rows.Close()
				return err
			}
			ops = append(ops, fmt.Sprintf("%s %s created %s intent %q", id, status, created, intent))
		}
		rows.Close()
		c.doubleWhy["stripe"][i] += " (the ledger: " + strings.Join(ops, "; ") + ")"
	}
	return nil
}

// checkLLM: every generation names an operation, and none was billed more often than once
// plus the resends that followed an uncertain attempt.
func (c *checked) checkLLM(w *world, byID map[string]*ledgerOp, lost func(string, string)) {
	perOp := map[string]int{}
	for _, g := range w.llm.Generations() {
		c.generations++
		id, _, _ := strings.Cut(g.ClientRequestID, ".")
		if byID[id] == nil {
			lost("charged at a provider for no operation", "generation "+g.ID+" for "+g.ClientRequestID)
			continue
		}
		perOp[id]++
	}
	for _, id := range sortedKeys(perOp) {
		o, n := byID[id], perOp[id]
		resends := 0
		for i := 1; i < len(o.attempts); i++ {
			if o.attempts[i-1].Uncertain() {
				resends++
			}
		}
		if n > 1+resends {
			c.doubleWhy["llm"] = append(c.doubleWhy["llm"], fmt.Sprintf("%s %s billed %d times with %d resends after an uncertain attempt", o.kind, id, n, resends))
		}
		if n > 1 {
			c.possibleDuplicates += n - 1
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
