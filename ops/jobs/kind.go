package jobs

import (
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// Kind is the jobs' kind, llm_job, as the program registers it with the ledger: a
// generation shared by every job of one dedup key. The provider takes no idempotency key;
// the policy is batch (an uncertain attempt is not resent: the generation waits as unknown
// for a lookup or a person) unless retryUncertain allows a resend, which is then counted as
// a possible duplicate. A generation is a chat completion, looked up in the provider's
// stored completions.
func Kind(retryUncertain bool) ops.KindSpec {
	return ops.KindSpec{Kind: ops.KindLLMJob, Name: "AI request",
		Policy: ops.Policy{RetryUncertain: retryUncertain, NoProviderKey: true}, Lookup: ops.LookupStoredCompletions,
		Record: llm.RecordOf, Jobs: true, Generation: true, Customer: llm.CustomerStatus, Call: llm.CallOf, APIs: []string{llm.ChatAPI()},
		KeyNote: "%s takes no idempotency key: a resend of this generation may be billed twice. " +
			"What protects it is the job's dedup key: every job of the same input is answered from this one generation, for good."}
}

// NewLedger returns the ledger job workers use: leases of the given length (they are the
// job's lease too), backoff shorter than half a lease so a retry never outlives its lease,
// and the jobs' kind registered with the policy retryUncertain chooses (Kind).
func NewLedger(store ops.Store, clock ops.Clock, lease time.Duration, retryUncertain bool) *ops.Ledger {
	l := ops.NewLedger(store, clock)
	if lease > 0 {
		l.Limits.Lease = lease
	}
	l.Limits.MaxBackoff = min(l.Limits.MaxBackoff, l.Limits.Lease/2)
	l.Limits.BaseBackoff = min(l.Limits.BaseBackoff, l.Limits.MaxBackoff)
	l.Register(Kind(retryUncertain))
	return l
}
