package desk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/recon"
	"github.com/settle-dev/settle/ops/refund"
)

// The outcomes of a lookup made from the dashboard.
const (
	// LookupClosed: the provider had a record and the operation was closed with it.
	LookupClosed = "closed"
	// LookupAlreadyClosed: someone or something closed the operation first.
	LookupAlreadyClosed = "already_closed"
	// LookupNotFound: the provider has no record carrying the operation's id.
	LookupNotFound = "not_found"
	// LookupInFlight: a worker holds a live lease; nothing may be closed now.
	LookupInFlight = "in_flight"
	// LookupUnsupported: no lookup exists for this kind of operation (LLM calls and jobs).
	LookupUnsupported = "no_lookup"
	// LookupUnavailable: the provider could not be asked; trying later may work.
	LookupUnavailable = "unavailable"
	// LookupFailed: an internal error; the details are in the logs.
	LookupFailed = "error"
	// LookupProposed: the close needs a second person; it awaits approval (ops rule 13).
	LookupProposed = "proposed"
	// LookupNotItsRecord: the provider holds a record naming the operation that cannot be
	// its own (another amount or currency, account or provider); it closes nothing.
	LookupNotItsRecord = "not_its_record"
)

// MaxCloseNoteLength bounds the note a person writes when closing an operation, in
// characters as the form's field counts them, whatever bytes each takes.
const MaxCloseNoteLength = 2000

// LookupOutcome is what one lookup asked from the dashboard came to.
type LookupOutcome struct {
	OperationID string
	// Op is the operation as it is after the lookup; nil when it could not be read.
	Op      *ops.Operation
	Outcome string
	Records []ops.ProviderRecord
	// Message says in plain words what happened and, when a person must act, why.
	Message string
	// Proposal is the close proposed instead of made, when it needs approval.
	Proposal *ops.Proposal
}

// NeedsPerson reports whether the operation is still open after the lookup, so a person
// has to decide what to do with it.
func (o LookupOutcome) NeedsPerson() bool {
	return o.Outcome != LookupClosed && o.Outcome != LookupAlreadyClosed
}

// BulkOutcome sums up a lookup on many operations.
type BulkOutcome struct {
	Results       []LookupOutcome
	Closed        int
	AlreadyClosed int
	NeedPerson    int
	// Reasons counts the operations that need a person by outcome.
	Reasons map[string]int
}

// AuditLogEntry is one recorded action: who did what to which entity, when, and the state
// before and after.
type AuditLogEntry struct {
	ID       int64
	At       time.Time
	Actor    string
	Action   string
	Entity   string
	EntityID string
	Before   json.RawMessage
	After    json.RawMessage
	Reason   string
	// EvidenceID links the evidence that justified the action, when there is some.
	EvidenceID int64
}

// AuditWriter records actions that change nothing in the ledger itself, such as a lookup
// that found nothing or a change to a user.
type AuditWriter interface {
	RecordAudit(ctx context.Context, e AuditLogEntry) error
}

// Desk is the on-call desk: lookups and closes asked by people on the dashboard. Every
// close goes through Ledger.Close, the compare-and-set of ops rule 6, and every action is
// recorded in the audit log.
type Desk struct {
	Ledger *ops.Ledger
	// Refunds looks refunds up at the provider; nil answers "unavailable".
	Refunds *refund.Tool
	// Completions looks LLM calls and jobs up at their provider as their API allows (stored
	// completions, responses by their recorded id); nil answers that no lookup exists for them.
	Completions *llm.Lookups
	// Findings records the double generations a lookup finds as exceptions; nil records
	// none (the reconciler still does).
	Findings recon.DoubleStore
	Events   ops.EventStore
	Audit    AuditWriter
	// Bulk keeps the bulk lookups run over a whole filter; nil turns them off.
	Bulk BulkStore
	// Workers is how many lookups of a bulk action run at once (default 4); the provider
	// adapter rate-limits its reads on top.
	Workers int
	// Approvals is the global approval policy (ops rule 13); each tenant's own settings in
	// Proposals override it. With Proposals nil no close needs approval.
	Approvals ops.ApprovalPolicy
	Proposals ops.ProposalStore
	// People tells approvals who holds the dashboard's accounts; closes that need approval
	// are refused without it.
	People People
	// SSOIssuer, set when single sign-on is configured, is its identity provider's issuer:
	// closes that need approval are then proposed and approved only by its people, never
	// by password accounts (ops rule 13).
	SSOIssuer string
}

// Lookup asks the provider about one operation and closes it when the provider has a
// record of it. An operation that stays open comes back with the reason in plain words.
func (d *Desk) Lookup(ctx context.Context, opID, actor string) (LookupOutcome, error) {
	op, err := d.Ledger.Get(ctx, opID)
	if err != nil {
		return LookupOutcome{OperationID: opID, Outcome: LookupFailed, Message: ops.ErrorMessage(err)}, err
	}
	out, err := d.lookup(ctx, op, actor)
	if aerr := d.recordLookup(ctx, op, out, actor); aerr != nil && err == nil {
		err = aerr
	}
	return out, err
}

// LookupMany looks up each operation and never stops at one failure: each result says
// what happened to its operation.
func (d *Desk) LookupMany(ctx context.Context, ids []string, actor string) BulkOutcome {
	res := make([]LookupOutcome, len(ids))
	workers := d.Workers
	if workers <= 0 {
		workers = 4
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out, err := d.Lookup(ctx, ids[i], actor)
				if err != nil && out.Outcome == "" {
					out.Outcome, out.Message = LookupFailed, ops.ErrorMessage(err)
				}
				out.OperationID = ids[i]
				res[i] = out
			}
		}()
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	b := BulkOutcome{Results: res, Reasons: map[string]int{}}
	for _, r := range res {
		switch {
		case r.Outcome == LookupClosed:
			b.Closed++
		case r.Outcome == LookupAlreadyClosed:
			b.AlreadyClosed++
		default:
			b.NeedPerson++
			b.Reasons[r.Outcome]++
		}
	}
	return b
}

func (d *Desk) lookup(ctx context.Context, op *ops.Operation, actor string) (LookupOutcome, error) {
	now := d.Ledger.Clock.Now()
	out := LookupOutcome{OperationID: op.ID, Op: op}
	switch {
	case op.Status.Final():
		out.Outcome, out.Message = LookupAlreadyClosed, ops.AlreadyClosed(op).Message
		return out, nil
	case d.Ledger.Kind(op.Kind).Lookup == ops.LookupStoredCompletions:
		return d.lookupLLM(ctx, op, actor)
	case d.Ledger.Kind(op.Kind).Lookup != ops.LookupPaymentRecords:
		out.Outcome, out.Message = LookupUnsupported, fmt.Sprintf("No lookup exists for %s operations.", op.Kind)
		return out, nil
	case d.Refunds == nil:
		out.Outcome, out.Message = LookupUnavailable, "No refund provider is configured on this server, so nothing can be looked up."
		return out, nil
	case op.Leased(now):
		out.Outcome = LookupInFlight
		out.Message = fmt.Sprintf("A worker is sending it until %s; look again once the lease has ended.", op.LeaseUntil.UTC().Format(time.RFC3339))
		return out, nil
	}
	res, applied, err := d.Refunds.Lookup(ctx, d.Events, op.ID, actor)
	if ended, err := lookupEnded(&out, res, applied, err); ended {
		return out, err
	}
	switch {
	case !res.Found():
		out.Outcome = LookupNotFound
		out.Message = "The provider has no refund carrying this operation's id. " + d.notExecutedHint(ctx, op, now)
		return out, nil
	}
	switch o := applied.Outcome; {
	case o == "closed":
		out.Outcome = LookupClosed
		out.Message = fmt.Sprintf("Closed as %s: %s has %s.", applied.Op.Status, op.Provider, applied.Op.ProviderRef)
		if applied.Op.ProviderRef == "" {
			out.Message = fmt.Sprintf("Closed as %s with the provider's record %s.", applied.Op.Status, res.Records[0].Ref)
		}
	case o == "already_closed":
		out.Outcome, out.Message = LookupAlreadyClosed, ops.AlreadyClosed(applied.Op).Message
	case o == "in_flight":
		out.Outcome, out.Message = LookupInFlight, "A worker started sending it meanwhile; look again once its lease has ended."
	case ops.NotItsRecord(o):
		out.Outcome, out.Message = LookupNotItsRecord, notItsRecord(op, res.Records[0], applied.Outcome)
	default:
		out.Outcome, out.Message = LookupFailed, "The provider's record could not be applied."
	}
	if len(res.Records) > 1 {
		out.Message += fmt.Sprintf(" The provider holds %d records for this one operation: that is a double charge to report.", len(res.Records))
	}
	return out, nil
}

func (d *Desk) recordLookup(ctx context.Context, before *ops.Operation, out LookupOutcome, actor string) error {
	if d.Audit == nil {
		return nil
	}
	after := before
	if out.Op != nil {
		after = out.Op
	}
	e := AuditLogEntry{At: d.Ledger.Clock.Now(), Actor: actor, Action: "lookup", Entity: "operation", EntityID: before.ID,
		Before: statusJSON(before), After: statusJSON(after), Reason: out.Outcome + ": " + out.Message}
	if err := d.Audit.RecordAudit(context.WithoutCancel(ctx), e); err != nil {
		return fmt.Errorf("record lookup: %w", err)
	}
	return nil
}

func statusJSON(op *ops.Operation) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"status": op.Status, "version": op.Version})
	return b
}

func checkNote(note string) (string, error) {
	note = strings.TrimSpace(note)
	switch {
	case note == "":
		return "", ops.Errorf(ops.EINVALID, "Write a note that says why you close it.")
	case utf8.RuneCountInString(note) > MaxCloseNoteLength:
		return "", ops.Errorf(ops.EINVALID, "The note is longer than %d characters.", MaxCloseNoteLength)
	}
	return note, ops.CheckNote("The note", note)
}

// NotExecutedClose is a person closing a refund as not executed.
type NotExecutedClose struct {
	ID      string
	Version int64
	Note    string
	Actor   string
	// ActorID is the person's dashboard account: only a signed-in person may propose a
	// close that needs approval (ops rule 13).
	ActorID int64
}

// CloseNotExecuted is CloseNotExecutedBy for an actor without a dashboard account, such as
// a script: a close that needs approval is refused to it.
func (d *Desk) CloseNotExecuted(ctx context.Context, id string, version int64, note, actor string) (LookupOutcome, error) {
	return d.CloseNotExecutedBy(ctx, NotExecutedClose{ID: id, Version: version, Note: note, Actor: actor})
}

// CloseNotExecutedBy closes a refund as failed because the provider never ran it: a fresh
// lookup finds nothing and the key retention has passed (CheckNotExecuted). If the fresh
// lookup does find the refund, the operation is closed as succeeded with it instead, and
// the outcome says so. Where the tenant's approval policy asks for a second person
// (ops rule 13), the close becomes a proposal instead, and the outcome is LookupProposed.
func (d *Desk) CloseNotExecutedBy(ctx context.Context, p NotExecutedClose) (LookupOutcome, error) {
	note, err := checkNote(p.Note)
	if err != nil {
		return LookupOutcome{}, err
	}
	p.Note = note
	op, err := d.Ledger.Get(ctx, p.ID)
	if err != nil {
		return LookupOutcome{}, err
	}
	return d.closeNotExecuted(ctx, op, p, nil)
}

// closeNotExecuted runs every check of a close as not executed on op as p's actor sees it
// at p.Version, then proposes it (when approval is nil and the policy asks for it) or
// closes it, on behalf of the proposer when approval is set.
func (d *Desk) closeNotExecuted(ctx context.Context, op *ops.Operation, p NotExecutedClose, approval *ops.Approval) (LookupOutcome, error) {
	version, note, actor := p.Version, p.Note, p.Actor
	if op.Version != version && !op.Status.Final() {
		return LookupOutcome{}, ops.Errorf(ops.ECONFLICT, "Operation %s changed since you looked; reload the page and check again.", op.ID)
	}
	if !d.Ledger.Kind(op.Kind).NotExecuted {
		return LookupOutcome{}, ops.Errorf(ops.EINVALID, "Only a refund can be closed as not executed: an LLM provider keeps no key whose retention could show it never ran. Look it up, or close it by hand with a note.")
	}
	if d.Refunds == nil {
		return LookupOutcome{}, ops.Errorf(ops.EUNAVAILABLE, "No refund provider is configured on this server.")
	}
	now := d.Ledger.Clock.Now()
	attempts, err := d.Ledger.Attempts(ctx, op.ID)
	if err != nil {
		return LookupOutcome{}, err
	}
	if err := d.CheckNotExecuted(op, attempts, now); err != nil {
		return LookupOutcome{}, err
	}
	// Look again right before closing: the person may have read a lookup from minutes ago.
	out, err := d.lookup(ctx, op, actor)
	if aerr := d.recordLookup(ctx, op, out, actor); aerr != nil && err == nil {
		err = aerr
	}
	if err != nil || out.Outcome != LookupNotFound {
		if err == nil && out.Outcome == LookupUnavailable {
			err = ops.Errorf(ops.EUNAVAILABLE, "%s", out.Message)
		}
		return out, err
	}
	if approval == nil {
		if pr, err := d.proposeIfNeeded(ctx, op, ops.CloseNotExecuted, ops.StatusFailed, "", note, actor, p.ActorID); err != nil || pr != nil {
			return proposedOutcome(out, pr), err
		}
	}
	data, _ := json.Marshal(map[string]any{"note": note, "records_found": 0, "retry_until": op.RetryUntil, "checked_at": now})
	ev := ops.Evidence{Kind: ops.EvidenceLookup, Data: data, Summary: fmt.Sprintf(
		"Not executed: a lookup at %s found no refund for this operation, and the key retention ended at %s. Note: %s",
		op.Provider, op.RetryUntil.UTC().Format(time.RFC3339), note) + approvedLine(approval)}
	closed, err := d.Ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusFailed, Evidence: ev,
		Actor: closer(actor, approval), Approval: approval})
	if err != nil {
		return out, err
	}
	out.Op, out.Outcome, out.Message = closed, LookupClosed, "Closed as failed: the provider never ran it."
	return out, nil
}

// ManualClose is a person closing an operation by hand.
type ManualClose struct {
	ID      string
	Version int64
	To      ops.Status
	// ProviderRef is the provider's record that shows it succeeded: a refund id, an LLM
	// call's record as its API names it (a completion's or a response's id, whose answer
	// Settle fetches and stores for the client's key; a message's id; an embeddings
	// request's id).
	ProviderRef string
	Note        string
	Actor       string
	// ActorID is the person's dashboard account: only a signed-in person may propose a
	// close that needs approval (ops rule 13).
	ActorID int64
}

// CloseOutcome is what a person's close by hand came to: the operation closed, or, where a
// second person must approve it (ops rule 13), the proposal made instead.
type CloseOutcome struct {
	Op       *ops.Operation
	Proposal *ops.Proposal
}

var providerRefRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}$`)

// CloseManually closes an operation with a person's note as evidence. Succeeded also needs
// the provider's record id (ops rule 9), which the provider is asked for where it can be:
// a refund id, or an LLM call's record where the provider keeps the call, that it does not
// hold is refused. An LLM operation closed as succeeded gets the answer its record names
// fetched from the provider, where its API keeps one to read (a stored completion or
// response), so the client's key replays it; when the provider keeps no copy Settle can
// read (a message, embeddings, store: false, no store), the key answers that the answer is
// not stored, never an error.
// Where the tenant's approval policy asks for a second person (ops rule 13), the close
// becomes a proposal instead.
func (d *Desk) CloseManually(ctx context.Context, p ManualClose) (CloseOutcome, error) {
	if p.To != ops.StatusSucceeded && p.To != ops.StatusFailed {
		return CloseOutcome{}, ops.Errorf(ops.EINVALID, "Close as succeeded or failed.")
	}
	note, err := checkNote(p.Note)
	if err != nil {
		return CloseOutcome{}, err
	}
	p.Note = note
	op, err := d.Ledger.Get(ctx, p.ID)
	if err != nil {
		return CloseOutcome{}, err
	}
	hint := d.Ledger.Kind(op.Kind).RecordOf(op).Hint
	p.ProviderRef = strings.TrimSpace(p.ProviderRef)
	if p.To == ops.StatusSucceeded && p.ProviderRef == "" {
		return CloseOutcome{}, ops.Errorf(ops.EINVALID, "Succeeded needs the provider's record: give its id (%s).", hint)
	}
	if p.ProviderRef != "" && !providerRefRe.MatchString(p.ProviderRef) {
		return CloseOutcome{}, ops.Errorf(ops.EINVALID, "The provider's record id may hold only letters, digits and _.:- (%s).", hint)
	}
	if !op.Status.Final() {
		if err := d.checkManual(ctx, op, p); err != nil {
			return CloseOutcome{}, err
		}
		if err := d.checkRecord(ctx, op, p.To, p.ProviderRef); err != nil {
			return CloseOutcome{}, err
		}
		pr, err := d.proposeIfNeeded(ctx, op, ops.CloseManual, p.To, p.ProviderRef, note, p.Actor, p.ActorID)
		if err != nil || pr != nil {
			return CloseOutcome{Op: op, Proposal: pr}, err
		}
	}
	closed, err := d.closeManual(ctx, op, p, nil)
	return CloseOutcome{Op: closed}, err
}

// closeManual closes op as p says, on behalf of the proposer when approval is set.
func (d *Desk) closeManual(ctx context.Context, op *ops.Operation, p ManualClose, approval *ops.Approval) (*ops.Operation, error) {
	note, ref := p.Note+approvedLine(approval), p.ProviderRef
	// Checked again at the close itself: an approval comes later, when a lookup may have
	// found the record to be another operation's meanwhile, or the provider failed it.
	if approval != nil {
		if err := d.checkRecord(ctx, op, p.To, ref); err != nil {
			return nil, err
		}
	}
	var res *ops.Result
	if p.To == ops.StatusSucceeded && d.Ledger.Kind(op.Kind).Generation && !op.Status.Final() {
		var why string
		var err error
		if res, why, err = d.answerFor(ctx, op, ref); err != nil {
			return nil, err
		}
		if res == nil {
			note += " [Settle could not fetch the answer: " + why + " Retries with the key are told to ask again with a new key.]"
		} else {
			note += " [Settle fetched the answer of " + ref + " from the provider's store; retries with the key replay it.]"
		}
	}
	return d.Ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: p.Version, To: p.To, Actor: closer(p.Actor, approval), Result: res,
		Evidence: ops.Evidence{Kind: ops.EvidenceNote, ProviderRef: ref, Summary: note}, Approval: approval})
}

// lookupEnded records a provider lookup's records and the operation it left, and fills out
// when the lookup ended without records to describe: the operation closed meanwhile, the
// provider could not be asked, or the lookup failed (its error is returned). It reports
// whether it did.
func lookupEnded(out *LookupOutcome, res ops.LookupResult, applied ops.Applied, err error) (bool, error) {
	out.Records = res.Records
	if applied.Op != nil {
		out.Op = applied.Op
	}
	var e *ops.Error
	switch {
	case errors.As(err, &e) && e.Closed != nil:
		out.Outcome, out.Message = LookupAlreadyClosed, e.Message
	case ops.Unreachable(err):
		// The provider may well have answered: it is Settle's own record that failed.
		out.Outcome, out.Message = LookupUnavailable,
			"Settle's database could not be reached, so what the lookup found may not have been recorded; try again in a few seconds."
	case ops.ErrorCode(err) == ops.EUNAVAILABLE || errors.Is(err, context.DeadlineExceeded):
		out.Outcome, out.Message = LookupUnavailable, "The provider could not be asked just now; try again in a moment."
	case err != nil:
		out.Outcome, out.Message = LookupFailed, ops.ErrorMessage(err)
		return true, err
	default:
		return false, nil
	}
	return true, nil
}
