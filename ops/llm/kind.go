package llm

import "github.com/settle-dev/settle/ops"

// Kind is the gateway's kind, llm_call, as the program registers it with the ledger. The
// provider takes no idempotency key, so a resend after an uncertain attempt may be billed
// twice: the default policy (interactive) allows it and counts it as a possible duplicate,
// and each call is opened with its tenant's and route's mode. A call is looked up as its
// API allows (a chat completion in the provider's stored completions, a response by its id),
// and its page names its provider's record as its API does (RecordOf).
func Kind() ops.KindSpec {
	return ops.KindSpec{Kind: ops.KindLLMCall, Name: "AI request",
		Policy: ops.Policy{RetryUncertain: true, NoProviderKey: true}, Lookup: ops.LookupStoredCompletions,
		Record: RecordOf, Generation: true, Customer: CustomerStatus, Call: CallOf, APIs: APINames(),
		KeyNote: "%s takes no idempotency key: a resend of this call may be billed twice, so Settle never treats one as safe. " +
			"What protects the client is Settle's own replay: its Idempotency-Key answers from this operation until the time below."}
}

// CustomerStatus turns a request to an LLM (a call or a job's generation) into the
// customer-facing truth. While the outcome is unknown it never says done or not
// (ops rule 12). Its failure says the request did not go through, nothing of money, so the
// charges made matter not to it.
func CustomerStatus(op *ops.Operation, _ []ops.ProviderRecord) ops.CustomerStatus {
	switch op.Status {
	case ops.StatusSucceeded:
		return ops.CustomerStatus{Known: true, Headline: "Completed", Sentence: "Your request has been completed."}
	case ops.StatusFailed:
		return ops.CustomerStatus{Known: true, Headline: "Did not go through",
			Sentence: "Your request did not go through. A colleague will look into it and reply in this chat."}
	case ops.StatusUnknown, ops.StatusExpired:
		return ops.CustomerStatus{Headline: "Being checked: the outcome is not known yet",
			Sentence: "We can't confirm your request yet. A colleague is checking and will reply in this chat."}
	default:
		return ops.CustomerStatus{Headline: "In progress",
			Sentence: "Your request is being processed. We'll confirm in this chat as soon as it's done."}
	}
}
