// Package ops is Settle's domain: operations, their statuses and the rules that keep one
// user intent equal to one paid side effect. It holds no HTTP and no SQL; adapters in its
// subpackages implement the interfaces declared here.
//
// Settle stands between the people and programs that ask for paid side effects (a support
// agent issuing a Stripe refund, an application calling an LLM, a pipeline summarising a
// document) and the providers that perform them. Clients repeat themselves: a tool call
// times out and the agent tries again, a person clicks twice, a worker dies half-way and
// another takes its work over. Settle records each intent as an operation before anything
// is sent, sends it with one idempotency key however often it must be tried, and answers
// every repeat from what it recorded, so one user intent costs at most one paid side effect.
// When Settle cannot know what a provider did, it says so, stops sending, and hands the
// operation to the reconciler or to a person on the dashboard (on-call, support, managers),
// who close it from the provider's own records.
//
// This comment is where Settle's guarantees are written down. Code comments cite its
// numbered rules as "rule N" inside package ops and as "ops rule N" outside it.
//
// # Vocabulary
//
//   - Tenant: one customer account of Settle, with its own API tokens. Every operation,
//     client request, job and key belongs to exactly one tenant; nothing is shared or
//     deduplicated across tenants. A tenant may be bound to a Stripe connected account: its
//     Stripe calls then go to that account only. Each Stripe operation keeps the account it
//     was opened for, and its attempts, lookups and records stay with that account after the
//     tenant moves to another; a provider record or event from any other account never
//     changes it.
//   - Operation: one user intent that causes a paid or side-effecting call at a provider,
//     of kind refund, llm_call or llm_job. Everything else (client requests, attempts,
//     evidence, audit rows, outbox events) hangs from it.
//   - Intent key: what makes two client requests the same intent. For a refund it is
//     order, amount and currency; for an LLM call, the client's Idempotency-Key; for a
//     pipeline job's generation, its dedup key.
//   - Ownership: the lease of an in-progress operation. Only the process that holds a live
//     lease sends attempts for it; the lease ends when the owner finishes or releases it, or
//     runs out, and a lease that ran out may be taken over by another process.
//   - Provider key: the idempotency key sent to the provider, made from the operation's
//     id (ProviderKeyFor), which the server makes, and never from anything a client sends.
//     One per operation, for all its attempts.
//   - Fingerprint: the SHA-256 of the canonical JSON of every field that changes the result
//     or the price. A repeat of an open intent with another fingerprint is refused, never
//     sent.
//   - Dedup key: the key of a pipeline job's computation (tenant, document hash, pipeline,
//     prompt version, model profile). Jobs with one dedup key share one generation.
//   - Client request: one time a client asked (an HTTP request, a tool call, a click),
//     recorded with how it was answered: new, replayed, in_progress, conflict, checking,
//     retried or rejected.
//   - Attempt: one send to the provider, recorded before it leaves. Its outcome is one of:
//     ok (the provider did it and gave its record id), timeout (no answer: unknown whether
//     it ran), rate_limited (refused before running, may be retried after Retry-After),
//     key_in_use (the provider is still running this key for another request),
//     server_error (a provider 500), invalid (the provider refused it: nothing ran) or
//     not_sent (it never left Settle).
//   - Provider charge: a side effect as the provider records it (a Stripe refund, a billed
//     LLM request). An orphan is a provider charge that names no operation of ours; a double
//     charge is two or more provider charges for one operation.
//   - Evidence: what justifies closing an operation: the provider's response, a lookup at the
//     provider, a webhook, a reconciliation record, or a person's note. Only the first four
//     are the provider's own word.
//
// # Statuses
//
// An operation moves through these statuses:
//
//	received ──► in_progress ──► succeeded | failed | unknown
//	unknown ──(evidence)──► succeeded | failed
//	received | in_progress | unknown ──(past the provider's key retention)──► expired
//	expired ──(evidence)──► succeeded | failed
//	succeeded ──(the provider's own record failed afterwards)──► failed
//
// Succeeded and failed are final: no person, worker or retry changes them. The one exception
// is the provider's own word that a refund it accepted (pending) failed or was canceled
// later: the operation becomes failed after success and a reconciliation exception is
// raised, since the customer was told the refund was on its way. The others are open, and an
// intent has at most one open operation.
//
//   - An in_progress operation carries a lease (its owner and an end time) and a phase that
//     says how far the current attempt got: sending, sent_to_provider or first_token.
//   - Stalled is not a status: it is an in_progress operation whose lease ran out. The
//     reaper takes it over and sends again with the same key where the kind allows a resend
//     of an uncertain attempt; otherwise it becomes unknown, or expired when it is past the
//     key retention.
//   - Unknown means nobody knows what the provider did. Nothing more is sent for it, by
//     anyone, until a person or the reconciler closes it.
//   - Expired means the provider may have forgotten the key, so a resend could run the side
//     effect again. It is never sent again; only a lookup at the provider or a person closes
//     it.
//
// # The rules
//
//  1. The provider key is created and committed together with the operation before the
//     first attempt, and every attempt of that operation, from any process, uses it.
//  2. An intent has at most one open operation, enforced by a partial unique index; the
//     insert that loses the race reads the winner's row.
//  3. An operation causes at most one provider charge. Reconciliation reports any breach.
//  4. Retries are bounded by the attempts per call (3), the attempts per operation (6), a
//     total deadline, and the provider's key retention. Backoff has jitter and honours
//     Retry-After.
//  5. A timeout is an unknown outcome, never a failure. A provider 500 saved under the key
//     replays itself on every resend, so it makes the operation unknown at once.
//  6. Closing is a compare-and-set on status and version, and it records its audit entry and
//     the outbox event (rule 10) in the same transaction. The entry is an audit row, except
//     where the change's own row holds it: an opening is read from its operation, and the
//     finish of an attempt by the process that sent it from the attempt, which keeps what
//     the operation became. When two people close at once, one wins and the other is told
//     who did.
//  7. A long provider call never runs inside a transaction that holds row locks.
//  8. Every client request and every attempt is recorded, so duplicate and timeout rates
//     are counted facts, not estimates. A request refused before it names its tenant (a bad
//     token, or a replica shedding load) is no tenant's request: the server's metrics count it.
//  9. An operation is never shown as succeeded without evidence from the provider.
//  10. Events leave through the transactional outbox, at least once, each with an event
//     id, so every receiver can apply each event once. A change writes its event when a
//     consumer is registered for the operation's tenant and kind; an event nobody receives
//     is not written, and a consumer registered later receives no event of earlier changes.
//  11. Nothing frees an intent while the provider may still run its key. An operation with
//     an uncertain attempt becomes failed only with evidence that nothing was executed: past
//     the key retention, no attempt in flight, and a fresh lookup that finds nothing. Until
//     then a person may close it as succeeded with the provider's record, or leave it open.
//  12. No answer says more than Settle knows. "This call sent nothing" and "nothing was
//     refunded" are different sentences, and the second needs evidence.
//  13. Where a tenant's approval policy asks for it (an amount at or above its threshold, or
//     any close as not executed), a close a person asserts takes two people: one proposes
//     it with the note and evidence, and a second with the on-call role or above approves
//     it before the proposal expires. Nobody approves their own proposal, and an operation
//     has at most one open proposal. People are told apart by their dashboard accounts,
//     never by the emails the accounts show; with single sign-on configured, only people
//     its identity provider signs in propose and approve such a close; and neither person is
//     the admin who created or re-enabled the other's account within a proposal's lifetime
//     before the proposal, or since. An approval names the proposal its person
//     saw and applies only to that one. The approval carries out the close with every check
//     of rules 6 and 11 made again at that moment, applies only while the proposal is open,
//     and names both people in the audit row and the outbox event; a close by anyone or
//     anything else meanwhile supersedes the proposal, so nothing is closed twice.
//
// # Providers
//
// Stripe keeps idempotency keys for at least 24 hours; after that a reused key runs as a new
// request. Settle therefore stops resending well before the retention ends (with a margin)
// and expires the operation instead.
//
// LLM providers take no idempotency key, so a retry after an uncertain send may bill twice.
// Interactive calls may retry within their budget, and every such resend is counted as a
// possible duplicate; batch jobs never resend an uncertain attempt and wait for
// reconciliation or a person. What stands in for a lookup is the provider's store of
// completions: every attempt asks the provider to keep its completion tagged with the
// operation's id, so one whose answer was lost can be found and closed with the answer
// stored, and two found for one operation are a double generation. Where a call's API can
// be looked up so, the lookup comes before any resend: an answer found settles the
// operation and nothing is sent again, and only a lookup that finds nothing lets the resend
// go (a pipeline job's generation also waits while the store cannot be asked, where an
// interactive call, whose client is waiting, is sent). A send follows an uncertain send
// whenever any earlier attempt of the operation was uncertain, not only the last, whoever
// sends it (the same call, the client's retry, the worker that takes the operation over):
// a 429 or a send that never left in between says nothing of what that attempt did, and a
// lookup that found nothing settles nothing, so every later send is looked up first and
// counted. The reaper, which asks no provider, leaves such an operation to its client or
// worker instead of resending it. A provider that keeps none gives
// nothing to look up, and Settle says so instead of promising a lookup: Anthropic keeps no
// message that can be read again, so its calls whose answer was lost, or whose stream broke
// off, are settled by a person from its usage report or console. That report counts the
// prompt tokens billed per minute, model and key, not requests; the reconciler sets each
// minute beside the prompts of the attempts Settle sent (every attempt of one call sends one
// prompt) and reports a minute whose extra tokens are a resent call's first prompt as a
// possible double billing of that call. It closes nothing from it: a minute's sums name no
// message (rule 9), and a minute in order is no proof that an uncertain attempt ran nothing
// (rule 11).
//
// # Keys
//
// Three keys are kept apart:
//
//   - The intent key says which client requests are one intent. It is unique among open
//     operations per tenant and kind: the same key in two tenants is two intents.
//   - The provider key says which attempts are one request to the provider. It is the
//     operation's id's, unique across all tenants because the id is, so it needs no tenant
//     scope and no two intents, of one tenant or of two, can ever share one.
//   - The dedup key says which pipeline jobs are one computation. The tenant is one of the
//     fields it hashes, so a tenant never shares a generation with another.
//
// # Layout
//
// Package ops is the kernel and nothing else: the types (Tenant, Operation, Attempt,
// Evidence, statuses, outcomes), the rules as code (transitions, CheckSend, CheckClose,
// NextStatus, Backoff, the limits and policies), errors, the clock, money, and the Ledger
// that applies the rules over the Store interface, with the reaper that runs its stalled and
// expired operations. Around it are the tools built on the ledger and the adapters:
//
//   - ops/refund: the refund tool shared by the API and the MCP server.
//   - ops/desk: what people do: queues, lookups, closes, customer sentences, audit, and the
//     dashboard's users and their roles.
//   - ops/outbox: the relay that delivers the outbox rows the store writes with each
//     transition (rule 10), and the consumer that applies each event once.
//   - ops/notify: tells a person who follows an operation how it ended, with the sentence to
//     send the customer, through the follow-ups' outbox that every close writes to (rule 10):
//     a Slack-compatible webhook and SMTP mail.
//   - ops/pg: the Postgres store, the only place with SQL. ops/pg/localpg runs a private
//     PostgreSQL cluster for the demo, tests and benchmarks; ops/pg/pgtest gives each test
//     its own migrated database.
//   - ops/stripe: the Stripe adapter on stripe-go: sends refunds with the provider key,
//     classifies errors into attempt outcomes, looks refunds up, verifies webhooks, each in
//     the tenant's connected account when it is bound to one.
//   - ops/openai: the OpenAI-compatible provider adapter on net/http: sends chat
//     completions and responses (JSON or an SSE stream) and embeddings for the gateway and
//     chat completions for the job workers, classifies replies into attempt outcomes, reads
//     the provider's usage report for the reconciler, and reads its stored completions
//     (through openai-go) for lookups.
//   - ops/anthropic: the adapter of Anthropic's Messages API on net/http: sends the
//     gateway's messages (JSON or an SSE stream) with the client's anthropic-version and
//     anthropic-beta, classifies replies into attempt outcomes (529 overloaded as a
//     refusal at the door), and reads the Admin API's Messages usage report for the
//     reconciler.
//   - ops/llm: the LLM gateway (OpenAI's chat completions, responses and embeddings, and
//     Anthropic's messages).
//   - ops/jobs: LLM pipeline jobs, their leased workers and checkpoints.
//   - ops/recon: reconciliation of provider charges and LLM usage against the ledger: the
//     exceptions it finds and their workflow, the reconciliation table's metrics and
//     drill-down, and the per-minute rollups (Rollups) that /reconcile and /insights read,
//     split by tenant, kind, provider and the API an LLM operation called.
//   - ops/mcptool: the refund tools of Settle's MCP server.
//   - ops/retain: the retention: closed operations past SETTLE_RETENTION removed with their
//     rows in short batches, open ones never; the monthly partitions kept ahead and dropped
//     once emptied.
//   - ops/fake: stateful fake Stripe and LLM providers with fault injection.
//
// Imports point one way: code under ops/ imports nothing of the module outside ops/ but
// migrations, alerts (whose store ops/pg implements) and internal/httppost (how every
// notifier posts to a receiver without writing its URL into an error), and none of those
// imports anything under ops/. The test in internal/layering checks it.
package ops
