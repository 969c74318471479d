package llm

import (
	"fmt"

	"github.com/settle-dev/settle/ops"
)

// What Settle can truthfully say about an LLM call differs per API (ops rule 12): what the
// provider's record of the call is called and looks like, whether Settle can read its answer
// back from the provider, and how a person settles it when no lookup can. Each api says it
// (words); the desk, the operation's page and the gateway's answers ask for it through the
// kind's registration (Kind's Record) or the functions below, so no page compares routes.

// callWords is what is said about the calls of one API.
type callWords struct {
	// record is how a person names the provider's record of a call to close it as
	// succeeded, and what Settle does with it.
	record ops.RecordForm
	// kept names what the provider keeps of the API's calls for a lookup to read ("stored
	// completions"); empty for an API whose calls nothing keeps.
	kept string
	// noLookup says why a call to a provider of an API with nothing to look up cannot be
	// looked up, and who settles it; nil where a lookup can be made.
	noLookup func(provider string) string
	// byHand says how a person closes a call to a provider by hand when no lookup settles it.
	byHand func(provider string) string
}

func (chatAPI) words() callWords {
	return callWords{
		record: ops.RecordForm{Label: "Completion id", Hint: "chatcmpl-...",
			Fetch: "Settle fetches its answer from the provider's stored completions, so the key replays it; where the provider keeps this call, an id it does not hold is refused"},
		kept: "stored completions",
		byHand: func(p string) string {
			return fmt.Sprintf("Close it by hand: when %s's records show its completion, close it as succeeded with the completion id (chatcmpl-...).", p)
		},
	}
}

func (responsesAPI) words() callWords {
	return callWords{
		record: ops.RecordForm{Label: "Response id", Hint: "resp_...",
			Fetch: "Settle reads that response from the provider when it is one recorded on this call's attempts, so the key replays it; where the provider keeps this call, an id it does not hold is refused"},
		kept: "stored responses",
		byHand: func(p string) string {
			return fmt.Sprintf("Close it by hand: when %s's records show its response, close it as succeeded with the response id (resp_...).", p)
		},
	}
}

func (messagesAPI) words() callWords {
	return callWords{
		record: ops.RecordForm{Label: "Message id", Hint: "msg_...",
			Fetch: "Anthropic keeps no message Settle can read back, so its answer is not fetched: a retry with the key is told it is not stored and to ask again with a new key"},
		noLookup: func(string) string {
			return "Anthropic takes no idempotency key and has no lookup of a message, so a message whose answer was lost, " +
				"or whose stream broke off, can be neither fetched nor completed: only a person settles it, someone with the " +
				"on-call role who closes it by hand on Settle's dashboard, from Anthropic's usage report or console."
		},
		byHand: func(string) string {
			return "Close it by hand: when Anthropic's usage report or console shows the message, close it as succeeded with its message id (msg_...)."
		},
	}
}

func (embeddingsAPI) words() callWords {
	return callWords{
		record: ops.RecordForm{Label: "Request id (embeddings have no id of their own)", Hint: "req_...",
			Fetch: "the provider keeps no copy of the embeddings, so they are not fetched: a retry with the key is told they are not stored and to ask again with a new key"},
		noLookup: func(p string) string {
			return fmt.Sprintf("There is nothing to look up for an embeddings call: %s gives its answer no id and keeps no copy of it, "+
				"so only its usage report shows whether this call was billed, and only a person settles it, someone with the "+
				"on-call role who closes it by hand on Settle's dashboard.", p)
		},
		byHand: func(p string) string {
			return fmt.Sprintf("Close it by hand: when %s's usage report shows the call was billed, close it as succeeded with the "+
				"request id the provider gave it (req_...), since embeddings have no id of their own.", p)
		},
	}
}

// wordsOf is what is said about op's calls: those of its API, a job's generation being a
// chat completion.
func wordsOf(op *ops.Operation) callWords {
	a, err := apiFor(routeOf(op))
	if err != nil {
		a = chatAPI{}
	}
	return a.words()
}

// RecordOf is how a person names the provider's record of op to close it as succeeded, and
// what Settle does with it, as its API allows: the llm_call and llm_job kinds register it.
func RecordOf(op *ops.Operation) ops.RecordForm { return wordsOf(op).record }

// NoLookup says why op's API has nothing to look up at the provider, and who settles it; ""
// where a lookup can be made.
func NoLookup(op *ops.Operation) string {
	if lookupOf(op) != lookupUsageOnly {
		return ""
	}
	if w := wordsOf(op); w.noLookup != nil {
		return w.noLookup(op.Provider)
	}
	return fmt.Sprintf("%s keeps nothing of this call that Settle can read: only its usage report shows it, and only a person "+
		"settles it, someone with the on-call role who closes it by hand on Settle's dashboard.", op.Provider)
}

// Kept names what op's provider keeps of calls of its API for a lookup to read: "stored
// completions", "stored responses"; "" for an API whose calls nothing keeps.
func Kept(op *ops.Operation) string { return wordsOf(op).kept }
