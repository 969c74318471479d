package ops

import (
	"context"
	"fmt"
	"strings"
)

// KindSpec is what Settle knows about one kind of operation beyond the rules: the policy an
// operation of the kind is opened with, how its provider can be asked about it, and what the
// desk, the dashboard and the notifications say and offer for it. The package that opens
// operations of the kind describes it (ops/refund, ops/llm, ops/jobs), and the program
// registers it with the ledger when it wires itself (Ledger.Register), so that the code
// around the ledger asks the registry (Ledger.Kind) instead of comparing kinds.
type KindSpec struct {
	Kind Kind
	// Name is how support calls an operation of the kind: "Refund", "AI request".
	Name string
	// Policy is the policy an operation of the kind is opened with when its intent carries
	// none.
	Policy Policy
	// Lookup is how the provider can be asked what became of an operation of the kind.
	Lookup Lookup
	// RecordHint is the form of the provider's record a person gives to close one as
	// succeeded: "re_...". A kind whose record differs per operation says so in Record.
	RecordHint string
	// Record says, for one operation, how a person names the provider's record of it to
	// close it as succeeded and what Settle does with that record: an LLM call's record is
	// a chat completion's id, a response's, a message's or an embeddings request's, and only
	// some can be read back from the provider. Nil takes RecordHint.
	Record func(op *Operation) RecordForm
	// KeyNote says, with %s for the provider, what protects an operation of the kind from a
	// second execution when its provider takes no idempotency key (rule 12); empty where the
	// provider keeps keys, whose retention then says it.
	KeyNote string
	// NotExecuted says one may be closed as not executed: its provider keeps its key, so once
	// the key's retention ended with no attempt in flight, a lookup that finds nothing shows
	// it never ran (rule 11).
	NotExecuted bool
	// Jobs says one is the generation of pipeline jobs: its page lists the jobs it served,
	// and the jobs go on from it once it is closed.
	Jobs bool
	// Generation says one is a generation at an LLM provider: billed in USD with the LLM
	// money, and closed as succeeded with a completion whose answer Settle fetches so that the
	// client's retry replays it.
	Generation bool
	// Customer says what support may tell the customer about one, in plain words (rule 12).
	// made are the provider charges of op that Settle holds as having taken money, read for
	// a failed op only: a failed call may not say nothing moved while one of them did.
	Customer func(op *Operation, made []ProviderRecord) CustomerStatus
	// Call says which API of its provider one called and with which model, as the operation
	// keeps them from its opening or, before it is opened, as the request it stores names
	// them; nil for a kind whose operations call no such API (a refund).
	Call func(op *Operation) Call
	// APIs names, as Call.API does, every API of its provider an operation of the kind may
	// call, so that the pages can offer to split their counts by API; empty for a kind whose
	// operations call no such API.
	APIs []string
}

// RecordForm is how a person names the provider's record of one operation to close it as
// succeeded, and what Settle then does with it.
type RecordForm struct {
	// Label names the record on the close form: "Provider record id", "Message id".
	Label string
	// Hint is what its id looks like: "re_...", "msg_...".
	Hint string
	// Fetch says what Settle does with the record besides keeping it as evidence, such as
	// fetching the answer it names so the client's key replays it, or why it cannot; empty
	// when there is nothing more to say.
	Fetch string
}

// RecordOf is how a person names the provider's record of op, as the kind registered it.
func (s KindSpec) RecordOf(op *Operation) RecordForm {
	if s.Record != nil {
		return s.Record(op)
	}
	return RecordForm{Label: "Provider record id", Hint: s.RecordHint}
}

// Call is which API of its provider an operation called, and with which model, as people
// read it on the queue and the operation's page.
type Call struct {
	// API names the API in words: "chat completions", "responses", "embeddings",
	// "messages".
	API string
	// Model is the model the request named, kept past the purge of the request; empty
	// where the request named none.
	Model string
}

// Label is the API as a label, its words joined by underscores ("chat_completions"): how an
// operation stores the API it called, and how /metrics, the alerts and the rollups split
// their counts by API. It is empty for a call of no API.
func (c Call) Label() string { return strings.ReplaceAll(c.API, " ", "_") }

// CallOf is the API and model of op, or the zero Call where its kind says none.
func (s KindSpec) CallOf(op *Operation) Call {
	if s.Call == nil {
		return Call{}
	}
	return s.Call(op)
}

// Of reports whether op is of the kind: a tool that serves one kind (the refund tool's MCP
// status) asks it of an operation it was handed.
func (s KindSpec) Of(op *Operation) bool { return op.Kind == s.Kind }

// Lookup is how a provider can be asked what became of an operation.
type Lookup string

// The ways of looking an operation up.
const (
	// LookupNone: the provider cannot be asked; a person checks its records.
	LookupNone Lookup = ""
	// LookupPaymentRecords: the provider lists its records of the operation's payment, each
	// naming the operation (Stripe's refunds).
	LookupPaymentRecords Lookup = "payment_records"
	// LookupStoredCompletions: the provider keeps the answers it generated, tagged with the
	// operation and its tenant, when it is configured to store them.
	LookupStoredCompletions Lookup = "stored_completions"
)

// CustomerStatus is what support may tell a customer about an operation, in plain words.
type CustomerStatus struct {
	// Headline is the status for the support agent.
	Headline string
	// Sentence is the exact sentence to send to the customer.
	Sentence string
	// Known is false while the outcome is not known: then nobody says succeeded or failed.
	Known bool
}

// MadeCharges reads the provider charges of an operation that Settle holds as having
// taken money (ProviderRecord.Charged), whichever path recorded them.
type MadeCharges interface {
	MadeCharges(ctx context.Context, opID string) ([]ProviderRecord, error)
}

// CustomerStatusOf is what support may tell the customer about op, with the charges of op
// that r holds as made when op failed: a double refund recorded against a failed operation
// moved money, so the failure's sentence must not say none moved (rule 12).
func (s KindSpec) CustomerStatusOf(ctx context.Context, r MadeCharges, op *Operation) (CustomerStatus, error) {
	var made []ProviderRecord
	if op.Status == StatusFailed && s.Customer != nil {
		var err error
		if made, err = r.MadeCharges(ctx, op.ID); err != nil {
			return CustomerStatus{}, fmt.Errorf("read the charges of %s: %w", op.ID, err)
		}
	}
	return s.CustomerStatus(op, made), nil
}

// CustomerStatus is what support may tell the customer about op, of whose charges made are
// those Settle holds as made. A kind that registered no wording says only that the request
// is being checked, which is true whatever happened.
func (s KindSpec) CustomerStatus(op *Operation, made []ProviderRecord) CustomerStatus {
	if s.Customer != nil {
		return s.Customer(op, made)
	}
	return CustomerStatus{Headline: "Being checked: the outcome is not known yet",
		Sentence: "We can't confirm your request yet. A colleague is checking and will reply in this chat."}
}

// Register adds the kinds a program handles to the ledger, as it is wired. The registry is
// not safe to change while the ledger serves: register every kind before the first call. A
// kind registered twice, or a spec without a known kind or a name, is a wiring mistake and
// panics.
func (l *Ledger) Register(specs ...KindSpec) {
	if l.kinds == nil {
		l.kinds = map[Kind]int{}
	}
	for _, s := range specs {
		if !s.Kind.Valid() || s.Name == "" {
			panic(fmt.Sprintf("ops: register kind %q: a known kind with a name is required", s.Kind))
		}
		if _, dup := l.kinds[s.Kind]; dup {
			panic(fmt.Sprintf("ops: kind %q is registered twice", s.Kind))
		}
		l.kinds[s.Kind] = len(l.specs)
		l.specs = append(l.specs, s)
	}
}

// Kind returns the registered spec of k. An unregistered kind gets a spec that offers
// nothing: its name is the kind itself, it has no lookup, and its customer sentence says it
// is being checked.
func (l *Ledger) Kind(k Kind) KindSpec {
	if i, ok := l.kinds[k]; ok {
		return l.specs[i]
	}
	return KindSpec{Kind: k, Name: string(k)}
}

// Kinds lists the registered kinds in the order they were registered.
func (l *Ledger) Kinds() []KindSpec { return append([]KindSpec(nil), l.specs...) }
