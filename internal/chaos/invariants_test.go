package chaos

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/refund"
	"github.com/settle-dev/settle/ops/stripe"
)

// ledgerOp is one operation of the seed as the ledger holds it.
type ledgerOp struct {
	op       *ops.Operation
	attempts []ops.Attempt
	// evidence are the provider refs of its evidence as the timeline reads it ("" for a note
	// without one).
	evidence []string
}

func (o *ledgerOp) hasEvidenceFor(ref string) bool {
	for _, e := range o.evidence {
		if e == ref {
			return true
		}
	}
	return false
}

// world is the seed's end state: the ledger's rows and the providers' own records.
type world struct {
	ops     []*ledgerOp
	byID    map[string]*ledgerOp
	refunds map[string][]fake.Refund     // charged refunds at the fake Stripe by operation id
	gens    map[string][]fake.Generation // billed generations at the fake LLM by operation id
	genByID map[string]fake.Generation
}

// read collects the end state of the seed's tenants.
func (r *seedRun) read(ctx context.Context) (*world, []string, error) {
	var fails []string
	ids := make([]int64, len(r.tenants))
	for i, t := range r.tenants {
		ids[i] = t.ID
	}
	rows, err := r.db.Pool.Query(ctx, `SELECT id::text FROM operations WHERE tenant_id = ANY($1) ORDER BY created_at, id`, ids)
	if err != nil {
		return nil, nil, err
	}
	var opIDs []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, nil, err
		}
		opIDs = append(opIDs, id)
	}
	rows.Close()
	w := &world{byID: map[string]*ledgerOp{}, refunds: map[string][]fake.Refund{}, gens: map[string][]fake.Generation{},
		genByID: map[string]fake.Generation{}}
	for _, id := range opIDs {
		op, err := r.db.Get(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		atts, err := r.db.Attempts(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		lo := &ledgerOp{op: op, attempts: atts}
		// The timeline is how the dashboard reads evidence: the evidence rows, and each
		// provider's direct answer from the attempt that recorded it.
		tl, err := deskstore.New(r.db).Timeline(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range tl.Evidence {
			lo.evidence = append(lo.evidence, e.ProviderRef)
		}
		w.ops = append(w.ops, lo)
		w.byID[id] = lo
	}
	for _, rf := range r.stripe.Refunds() {
		if !charged(rf.Status) {
			continue
		}
		id := rf.Metadata[stripe.MetadataKey]
		if w.byID[id] == nil {
			fails = append(fails, fmt.Sprintf("at most one charge per intent: Stripe holds refund %s of %d that names no operation of the seed (%q)", rf.ID, rf.Amount, id))
			continue
		}
		w.refunds[id] = append(w.refunds[id], rf)
	}
	for _, g := range r.llm.Generations() {
		w.genByID[g.ID] = g
		id, _, _ := strings.Cut(g.ClientRequestID, ".")
		if w.byID[id] == nil {
			fails = append(fails, fmt.Sprintf("at most one charge per intent: the LLM billed %s for no operation of the seed (%q)", g.ID, g.ClientRequestID))
			continue
		}
		w.gens[id] = append(w.gens[id], g)
	}
	return w, fails, nil
}

// check reads the seed's end state and returns every invariant it breaks.
func (r *seedRun) check(ctx context.Context) ([]string, error) {
	w, fails, err := r.read(ctx)
	if err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	r.checkCharges(w, fail)
	if err := r.checkOwned(ctx, w, fail); err != nil {
		return nil, err
	}
	for _, o := range w.ops {
		r.checkEvidence(w, o, fail)
	}
	if err := r.checkRequests(ctx, fail); err != nil {
		return nil, err
	}
	r.checkAnswers(w, fail)
	return fails, nil
}

// checkCharges: at most one provider charge per intent, counted at the providers. A refund
// intent is refunded at most once whatever became of its operations. An LLM generation is
// billed once per operation, plus the resends that followed an uncertain attempt, which
// only a policy that accepts possible duplicates makes; every billed generation is
// explained by an attempt the ledger recorded as billed or possibly billed.
func (r *seedRun) checkCharges(w *world, fail func(string, ...any)) {
	perIntent := map[string][]string{}
	for id, rfs := range w.refunds {
		o := w.byID[id]
		if len(rfs) > 1 {
			fail("at most one charge per intent: operation %s has %d refunds at Stripe", id, len(rfs))
		}
		k := fmt.Sprintf("%d|%s", o.op.TenantID, o.op.IntentKey)
		for _, rf := range rfs {
			perIntent[k] = append(perIntent[k], rf.ID+" of operation "+id)
		}
	}
	for k, refs := range perIntent {
		if len(refs) > 1 {
			fail("at most one charge per intent: intent %s was refunded %d times at Stripe: %v", k, len(refs), refs)
		}
	}
	for id, gens := range w.gens {
		o := w.byID[id]
		resends := 0
		for i := 1; i < len(o.attempts); i++ {
			if o.attempts[i-1].Uncertain() {
				resends++
			}
		}
		if len(gens) > 1+resends {
			fail("at most one charge per intent: operation %s (%s) was billed %d times with %d resends after an uncertain attempt", id, o.op.Kind, len(gens), resends)
		}
		for _, g := range gens {
			_, n, _ := strings.Cut(g.ClientRequestID, ".")
			a := attemptN(o.attempts, n)
			switch {
			case a == nil:
				fail("at most one charge per intent: generation %s (%s) has no attempt in the ledger", g.ID, g.ClientRequestID)
			case a.FinishedAt != nil && a.Outcome != ops.OutcomeOK && !a.Outcome.Uncertain():
				fail("at most one charge per intent: generation %s was billed but its attempt %d is recorded %s", g.ID, a.N, a.Outcome)
			}
		}
	}
}

func attemptN(atts []ops.Attempt, n string) *ops.Attempt {
	k, err := strconv.Atoi(n)
	if err != nil {
		return nil
	}
	for i := range atts {
		if atts[i].N == k {
			return &atts[i]
		}
	}
	return nil
}

// checkOwned: no operation is left without a lease or a queue. An open operation is leased,
// stalled (the reaper takes it), released with a key retention (the client's retry takes it,
// or it expires into a queue), or in the received, unknown or expired queue people see; no
// job waits on an operation that nobody will settle.
func (r *seedRun) checkOwned(ctx context.Context, w *world, fail func(string, ...any)) error {
	now := r.clock.Now()
	inQueue := map[string]bool{}
	for _, t := range r.tenants {
		for _, s := range []ops.Status{ops.StatusReceived, ops.StatusUnknown, ops.StatusExpired} {
			page, err := deskstore.New(r.db).ListQueue(ctx, desk.QueueFilter{Status: s, TenantID: t.ID, Limit: 500}, now)
			if err != nil {
				return err
			}
			for _, op := range page.Ops {
				inQueue[op.ID] = true
			}
		}
	}
	jobOps := map[string]string{}
	ids := make([]int64, len(r.tenants))
	for i, t := range r.tenants {
		ids[i] = t.ID
	}
	rows, err := r.db.Pool.Query(ctx, `SELECT j.id::text, j.status, coalesce(j.operation_id::text, ''), j.lease_until IS NOT NULL,
	coalesce(o.status, '') FROM jobs j LEFT JOIN operations o ON o.id = j.operation_id WHERE j.tenant_id = ANY($1)`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, status, opID, opStatus string
		var leased bool
		if err := rows.Scan(&id, &status, &opID, &leased, &opStatus); err != nil {
			return err
		}
		switch {
		case status == "unknown" && ops.Status(opStatus).Final():
			fail("no operation left without a queue: job %s waits unknown on operation %s, which is %s, and no worker took it", id, opID, opStatus)
		case status == "running" && !leased:
			fail("no operation left without a lease: job %s is running without a lease", id)
		}
		if status == "queued" || status == "running" {
			jobOps[opID] = id
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, o := range w.ops {
		op := o.op
		switch op.Status {
		case ops.StatusSucceeded, ops.StatusFailed:
		case ops.StatusInProgress:
			if op.LeaseUntil == nil && op.RetryUntil == nil && jobOps[op.ID] == "" {
				fail("no operation left without a lease or a queue: %s %s is in progress with no lease, no key retention to expire it and no job to resume it", op.Kind, op.ID)
			}
		default:
			if !inQueue[op.ID] {
				fail("no operation left without a queue: %s %s is %s but not in its queue", op.Kind, op.ID, op.Status)
			}
		}
	}
	return nil
}

// proven says whether a closed operation has the evidence its status needs, at the provider
// too: a success the provider's record of it, a failure evidence that nothing ran or a
// person's word, and no money moved for a refund.
func (w *world) proven(o *ledgerOp) string {
	op := o.op
	switch op.Status {
	case ops.StatusSucceeded:
		if op.ProviderRef == "" || !o.hasEvidenceFor(op.ProviderRef) {
			return fmt.Sprintf("succeeded with record %q but no evidence of it", op.ProviderRef)
		}
		if op.Kind == ops.KindRefund {
			for _, rf := range w.refunds[op.ID] {
				if rf.ID == op.ProviderRef {
					return ""
				}
			}
			return fmt.Sprintf("succeeded with refund %s, which Stripe does not hold for it", op.ProviderRef)
		}
		if g, ok := w.genByID[op.ProviderRef]; !ok || !strings.HasPrefix(g.ClientRequestID, op.ID+".") {
			return fmt.Sprintf("succeeded with completion %s, which the provider did not bill for it", op.ProviderRef)
		}
	case ops.StatusFailed:
		if len(o.evidence) == 0 && ops.Uncertain(o.attempts) && !refusedLast(o.attempts) {
			return "failed without evidence although an attempt may have run"
		}
		if op.Kind == ops.KindRefund && len(w.refunds[op.ID]) > 0 {
			return fmt.Sprintf("failed although Stripe holds refund %s for it", w.refunds[op.ID][0].ID)
		}
	}
	return ""
}

// refusedLast reports whether the provider itself refused the operation's last attempt: its
// answer is the provider's record. Under Stripe's key it also answers for every earlier
// attempt, since a resend with the key replays what the key ran (a refund that was made
// comes back as that refund, never as a refusal), and the money check above proves it.
func refusedLast(atts []ops.Attempt) bool {
	if len(atts) == 0 {
		return false
	}
	a := atts[len(atts)-1]
	return a.FinishedAt != nil && a.Outcome == ops.OutcomeInvalid && a.HTTPStatus != 0
}

// checkEvidence: every closed operation has evidence, and no sentence for support claims
// an outcome the evidence does not hold.
func (r *seedRun) checkEvidence(w *world, o *ledgerOp, fail func(string, ...any)) {
	op := o.op
	why := w.proven(o)
	if op.Status.Final() && why != "" {
		fail("every closed operation has evidence: %s %s %s", op.Kind, op.ID, why)
	}
	cs := r.kinds.Kind(op.Kind).CustomerStatus(op, nil)
	if cs.Known != op.Status.Final() {
		fail("no sentence without evidence: %s %s is %s but support is told %q (known %v)", op.Kind, op.ID, op.Status, cs.Sentence, cs.Known)
	}
	if cs.Known && why != "" {
		fail("no sentence without evidence: support may tell the customer %q about %s %s, which is %s", cs.Sentence, op.Kind, op.ID, why)
	}
}

// checkRequests: every client request is recorded, the refused ones too.
func (r *seedRun) checkRequests(ctx context.Context, fail func(string, ...any)) error {
	for _, t := range r.tenants {
		for _, k := range []ops.Kind{ops.KindRefund, ops.KindLLMCall, ops.KindLLMJob} {
			if err := r.checkKindRecorded(ctx, t, k, fail); err != nil {
				return err
			}
		}
		var jobs, unrecorded int
		err := r.db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE operation_id IS NOT NULL AND NOT EXISTS (
	SELECT 1 FROM client_requests c WHERE c.tenant_id = j.tenant_id AND c.request_ref = 'job:' || j.id::text))
FROM jobs j WHERE tenant_id = $1`, t.ID).Scan(&jobs, &unrecorded)
		if err != nil {
			return err
		}
		r.mu.Lock()
		made := len(r.jobKeys[t.ID])
		r.mu.Unlock()
		if jobs != made {
			fail("every client request recorded: %s submitted %d jobs, the ledger holds %d", t.Name, made, jobs)
		}
		if unrecorded > 0 {
			fail("every client request recorded: %d jobs of %s hang from a generation without their request recorded", unrecorded, t.Name)
		}
	}
	return nil
}

// checkKindRecorded compares tenant t's requests of kind k with the ledger's, naming each
// request the ledger does not hold with what its client was told, so that a run that loses
// one says which and after what. Of job submissions only the refused are client requests
// here: an accepted one is its job, which the jobs' check counts.
func (r *seedRun) checkKindRecorded(ctx context.Context, t *ops.Tenant, k ops.Kind, fail func(string, ...any)) error {
	// A job's own requests to the provider, made by its workers, are its kind's rows too:
	// the jobs' check below counts those.
	rows, err := r.db.Pool.Query(ctx, `SELECT request_ref FROM client_requests WHERE tenant_id = $1 AND kind = $2
	AND NOT (kind = 'llm_job' AND request_ref LIKE 'job:%')`, t.ID, string(k))
	if err != nil {
		return err
	}
	recorded, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	made := r.requests[reqKey(t.ID, k)]
	if len(recorded) == len(made) {
		return nil
	}
	fail("every client request recorded: %s made %d %s requests, the ledger recorded %d", t.Name, len(made), k, len(recorded))
	left := map[string]int{}
	for _, ref := range recorded {
		left[ref]++
	}
	for _, ref := range made {
		if left[ref] == 0 {
			fail("every client request recorded: request %s of %s is not in the ledger; its client was told: %s", ref, t.Name, r.told[ref])
		}
		left[ref]--
	}
	return nil
}

var completionID = regexp.MustCompile(`"id":\s*"(chatcmpl-[^"]+)"`)

// checkAnswers: what clients were told holds at the end. A refund answered "refunded" is
// at Stripe and its operation succeeded; one answered "failed" moved no money. Every
// completion a client received was billed by the provider, and a whole answer belongs to an
// operation that succeeded.
func (r *seedRun) checkAnswers(w *world, fail func(string, ...any)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.refunds {
		if a.err != nil {
			continue
		}
		o := w.byID[a.answer.OperationID]
		switch a.answer.Status {
		case refund.Refunded, refund.Pending:
			found := false
			for _, rf := range w.refunds[a.answer.OperationID] {
				found = found || rf.ID == a.answer.RefundID
			}
			if o == nil || o.op.Status != ops.StatusSucceeded || !found {
				fail("no sentence without evidence: %s was answered %s with %s, which Stripe does not hold for operation %s", a.intent, a.answer.Status, a.answer.RefundID, a.answer.OperationID)
			}
		case refund.Failed:
			if o == nil || o.op.Status != ops.StatusFailed || len(w.refunds[a.answer.OperationID]) > 0 {
				fail("no sentence without evidence: %s was answered failed (%s) but operation %s moved money or did not fail", a.intent, a.answer.Reason, a.answer.OperationID)
			}
		}
	}
	for _, c := range r.chats {
		if c.err != nil || !c.began {
			continue
		}
		for _, m := range completionID.FindAllStringSubmatch(c.body, -1) {
			if _, ok := w.genByID[m[1]]; !ok {
				fail("no sentence without evidence: %s was answered with completion %s, which the provider never billed", c.intent, m[1])
			}
		}
		whole := !c.head.Stream || (strings.Contains(c.body, "data: [DONE]") && !strings.Contains(c.body, `"settle_error"`))
		o := w.byID[c.head.OperationID]
		// A whole success is answered before its close is written: a process killed
		// between the two leaves the operation open, for the recovery to settle or for a
		// person to close as failed (which an LLM call allows: it keeps the key answering
		// with that failure). A process that stalls there past its lease (a clock jump here)
		// is taken for dead: the reaper finishes its attempt as lease_expired and the close
		// it then tries is refused, as a dead process's would never come. The answer was
		// the provider's own, whose billing is checked above; what Settle itself says of
		// the operation is checked with the sentences.
		lostClose := (c.died || takenOver(o)) && o != nil && (!o.op.Status.Final() || strings.Contains(o.op.ClosedBy, "@"))
		if whole && (o == nil || (o.op.Status != ops.StatusSucceeded && !lostClose)) {
			fail("no sentence without evidence: %s got a whole answer from operation %s, which did not succeed", c.intent, c.head.OperationID)
		}
	}
}

// dump prints the end state for a failing seed: each operation with its attempts and
// evidence, the providers' records of it, and what its clients were told.
func (r *seedRun) dump(ctx context.Context, base time.Time) string {
	w, _, err := r.read(ctx)
	if err != nil {
		return "  (end state unreadable: " + err.Error() + ")\n"
	}
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Sub(base).String()
	}
	var b strings.Builder
	for _, o := range w.ops {
		op := o.op
		fmt.Fprintf(&b, "  %s %s %q %s v%d created %s closed %s by %q lease %s retry until %s ref %q\n", op.Kind, op.ID, op.IntentKey,
			op.Status, op.Version, op.CreatedAt.Sub(base), at(op.ClosedAt), op.ClosedBy, at(op.LeaseUntil), at(op.RetryUntil), op.ProviderRef)
		for _, a := range o.attempts {
			fmt.Fprintf(&b, "      attempt %d by %s at %s: %s %d %s\n", a.N, a.Owner, a.StartedAt.Sub(base), a.Outcome, a.HTTPStatus, a.ErrorCode)
		}
		for _, e := range o.evidence {
			fmt.Fprintf(&b, "      evidence %q\n", e)
		}
		for _, rf := range w.refunds[op.ID] {
			fmt.Fprintf(&b, "      at Stripe: %s %s %d\n", rf.ID, rf.Status, rf.Amount)
		}
		for _, g := range w.gens[op.ID] {
			fmt.Fprintf(&b, "      at the LLM: %s (%s)\n", g.ID, g.ClientRequestID)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.refunds {
		fmt.Fprintf(&b, "  %s told: %+v err %v\n", a.intent, a.answer, a.err)
	}
	for _, c := range r.chats {
		body := c.body
		if len(body) > 120 {
			body = body[:120] + "…"
		}
		fmt.Fprintf(&b, "  %s told: began %v op %s err %v %q\n", c.intent, c.began, c.head.OperationID, c.err, body)
	}
	return b.String()
}

// takenOver says another process finished one of o's attempts for its owner, whose lease
// had run out: that owner's close, if it came after, was refused by the compare-and-set
// on status and version (ops rule 6).
func takenOver(o *ledgerOp) bool {
	if o == nil {
		return false
	}
	for _, a := range o.attempts {
		if a.ErrorCode == "lease_expired" {
			return true
		}
	}
	return false
}
