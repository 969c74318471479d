package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/fake"
	"github.com/settle-dev/settle/ops/jobs"
)

// The timings of a schedule. Provider attempts time out after attemptTimeout of real time,
// so a fault that must outlast the client holds its answer longer; every other wait is
// short, since time that matters to the rules (leases, key retention, TTLs) moves on the
// seed's manual clock.
const (
	attemptTimeout = 200 * time.Millisecond
	// slowPastTimeout is how long a slow fault holds a key when it must outlast the
	// client: the provider commits after the client gave up.
	slowPastTimeout = attemptTimeout + 150*time.Millisecond
	// lease is the ledger's lease; a lease jump moves the clock past it.
	lease = 30 * time.Second
	// retention is Stripe's key retention and the LLM keys' TTL; a retention jump moves the
	// clock past it.
	retention = 24 * time.Hour
	// callDeadline bounds one client call in real time.
	callDeadline = 5 * time.Second
)

// stepKind is one thing that happens in a schedule.
type stepKind string

const (
	stepSend      stepKind = "send"           // clients send requests, duplicates at once
	stepJoin      stepKind = "join"           // wait for requests sent in the background
	stepLease     stepKind = "jump_lease"     // the clock moves past every lease
	stepRetention stepKind = "jump_retention" // the clock moves past key retention and TTLs
	stepReaper    stepKind = "reaper"         // one pass of the reaper
	stepPerson    stepKind = "person"         // a person acts on a row of a queue
	stepWorker    stepKind = "worker"         // job workers take what is due
)

// The person actions.
const (
	actLookup          = "lookup"
	actCloseSucceeded  = "close_succeeded"
	actCloseFailed     = "close_failed"
	actCloseNotExecute = "close_not_executed"
)

// The crash points of a refund or an LLM call: the process dies with its attempt recorded,
// before the send leaves or after the provider answered and before the answer is recorded.
const (
	crashBeforeSend = "before_send"
	crashAfterSend  = "after_send"
)

// The variants of a client request.
const (
	same        = "same"         // a repeat of the intent
	otherParams = "other_params" // the intent's key with another parameter
	invalid     = "invalid"      // refused before anything is opened
)

// tenantSpec is one tenant of a seed.
type tenantSpec struct {
	Name string
	// Batch makes the tenant's LLM calls batch: never resent after an uncertain attempt.
	Batch bool
}

// intent is one user intent of a schedule.
type intent struct {
	Name   string
	Kind   ops.Kind
	Tenant int
	// Refunds: the order, the amount, and the payment it refunds.
	Order        string
	Cents        int64
	Payment      string
	PaymentCents int64
	// LLM calls: the Idempotency-Key, whether the answer streams, the prompt.
	Key    string
	Stream bool
	Prompt string
	// Jobs: the document and the jobs' keys (two keys share one dedup key).
	Doc     string
	JobKeys []string
}

// send is one client request of a send step.
type send struct {
	Intent  int
	Copies  int
	Variant string
	// Crash, for a refund or an LLM call, kills the process of the first copy there.
	Crash string
}

// step is one step of a schedule.
type step struct {
	Kind stepKind
	// Send: the requests, sent at once; Background leaves them running into later steps.
	Sends      []send
	Background bool
	// Person: the action, and which row of the seed's queues it takes.
	Action string
	Pick   int
	// Worker: how many workers, and where the first one dies ("" for nowhere).
	Workers int
	Crash   string
}

// schedule is everything a seed draws. Real goroutine interleavings are not drawn: a
// schedule fixes what is injected, and the invariants must hold whichever way it runs.
type schedule struct {
	Seed         uint64
	Tenants      []tenantSpec
	JobRetry     bool
	Intents      []intent
	StripeFaults []fake.Fault
	LLMFaults    []fake.LLMFault
	Steps        []step
}

// pick returns one of the choices, by weight.
func pick[T any](r *rand.Rand, choices []T, weights []int) T {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := r.IntN(total)
	for i, w := range weights {
		if n < w {
			return choices[i]
		}
		n -= w
	}
	return choices[len(choices)-1]
}

// draw makes the schedule of a seed. Every draw comes from one PCG source seeded by it.
func draw(seed uint64) *schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x5e771e))
	s := &schedule{Seed: seed, JobRetry: r.IntN(2) == 0}
	for i := range 1 + r.IntN(2) {
		s.Tenants = append(s.Tenants, tenantSpec{Name: fmt.Sprintf("chaos-%d-%c", seed, 'a'+i), Batch: r.IntN(10) < 3})
	}
	nRefund, nLLM, nJob := r.IntN(3), r.IntN(3), 0
	if r.IntN(3) == 0 {
		nJob = 1
	}
	if nRefund+nLLM+nJob == 0 {
		nRefund = 1
	}
	for i := range nRefund {
		in := intent{Name: fmt.Sprintf("R%d", i+1), Kind: ops.KindRefund, Tenant: r.IntN(len(s.Tenants)),
			Order: fmt.Sprintf("o%d-%d", seed, i+1), PaymentCents: 1000 + 100*r.Int64N(40)}
		in.Payment = fmt.Sprintf("pi_chaos%dx%d", seed, i+1)
		if i > 0 && r.IntN(3) == 0 {
			// Two refunds of one payment: the second must fit in what the first left.
			prev := s.Intents[i-1]
			in.Tenant, in.Payment, in.PaymentCents = prev.Tenant, prev.Payment, prev.PaymentCents
		}
		in.Cents = in.PaymentCents / int64(1+r.IntN(2))
		s.Intents = append(s.Intents, in)
	}
	for i := range nLLM {
		s.Intents = append(s.Intents, intent{Name: fmt.Sprintf("L%d", i+1), Kind: ops.KindLLMCall, Tenant: r.IntN(len(s.Tenants)),
			Key: fmt.Sprintf("key-%d-%d", seed, i+1), Stream: r.IntN(2) == 0, Prompt: fmt.Sprintf("Question %d of seed %d: what is settled?", i+1, seed)})
	}
	for i := range nJob {
		in := intent{Name: fmt.Sprintf("J%d", i+1), Kind: ops.KindLLMJob, Tenant: r.IntN(len(s.Tenants)),
			Doc: fmt.Sprintf("Document %d of seed %d. Refunds are made once. Retries are answered from the ledger.", i+1, seed)}
		for k := range 1 + r.IntN(2) {
			in.JobKeys = append(in.JobKeys, fmt.Sprintf("job-%d-%d-%d", seed, i+1, k+1))
		}
		s.Intents = append(s.Intents, in)
	}
	s.drawFaults(r)
	s.drawSteps(r)
	return s
}

func (s *schedule) drawFaults(r *rand.Rand) {
	rate := r.Float64() * 0.7
	kinds := []string{"timeout_after_commit", "drop_after_commit", "rate_limit", "server_error", "unavailable", "slow_past_timeout", "slow", "refuse"}
	for n := 1; n <= 8; n++ {
		if r.Float64() >= rate {
			continue
		}
		f := fake.Fault{Method: "POST", Path: "/v1/refunds", Calls: []int{n}}
		switch k := pick(r, kinds, []int{4, 3, 3, 2, 3, 2, 2, 1}); k {
		case "slow_past_timeout":
			f.Kind, f.Delay = fake.FaultSlow, slowPastTimeout
		case "slow":
			f.Kind, f.Delay = fake.FaultSlow, 20*time.Millisecond
		case "timeout_after_commit":
			f.Kind, f.Delay = fake.FaultTimeoutAfterCommit, time.Minute
		default:
			f.Kind = fake.FaultKind(k)
		}
		s.StripeFaults = append(s.StripeFaults, f)
	}
	// Reads fail too, now and then: a payment that cannot be read refuses a new refund, and
	// a lookup that cannot be made leaves its row open.
	for n := 1; n <= 4; n++ {
		if r.Float64() < rate/3 {
			s.StripeFaults = append(s.StripeFaults, fake.Fault{Method: "GET", Path: "*", Calls: []int{n},
				Kind: pick(r, []fake.FaultKind{fake.FaultUnavailable, fake.FaultRateLimit}, []int{1, 1})})
		}
	}
	rate = r.Float64() * 0.7
	llmKinds := []fake.LLMFaultKind{fake.LLMFaultBillThenTimeout, fake.LLMFaultDropStream, fake.LLMFaultRateLimit,
		fake.LLMFaultServerError, fake.LLMFaultGarbage, fake.LLMFaultSlow, fake.LLMFaultStoreLag}
	for n := 1; n <= 8; n++ {
		if r.Float64() >= rate {
			continue
		}
		f := fake.LLMFault{Path: "/v1/chat/completions", Calls: []int{n}, Kind: pick(r, llmKinds, []int{4, 3, 3, 2, 1, 3, 1})}
		switch f.Kind {
		case fake.LLMFaultBillThenTimeout:
			f.Delay = time.Minute
		case fake.LLMFaultDropStream:
			f.Chunk = r.IntN(4)
		case fake.LLMFaultSlow:
			f.Delay = pick(r, []time.Duration{20 * time.Millisecond, slowPastTimeout}, []int{1, 1})
		case fake.LLMFaultStoreLag:
			f.Delay = pick(r, []time.Duration{10 * time.Second, 2 * time.Hour}, []int{1, 1})
		}
		if r.IntN(8) == 0 {
			f.Lag = time.Hour
		}
		s.LLMFaults = append(s.LLMFaults, f)
	}
}

func (s *schedule) hasKind(k ops.Kind) bool {
	for _, in := range s.Intents {
		if in.Kind == k {
			return true
		}
	}
	return false
}

func (s *schedule) drawSteps(r *rand.Rand) {
	first := step{Kind: stepSend}
	for i := range s.Intents {
		first.Sends = append(first.Sends, s.drawSend(r, i, true))
	}
	s.Steps = append(s.Steps, first)
	jobs := s.hasKind(ops.KindLLMJob)
	kinds := []stepKind{stepSend, stepLease, stepRetention, stepReaper, stepPerson, stepWorker}
	weights := []int{5, 3, 2, 3, 4, 0}
	if jobs {
		weights[5] = 5
	}
	retentionJumps, background := 0, false
	for range 3 + r.IntN(5) {
		k := pick(r, kinds, weights)
		if k == stepRetention && retentionJumps == 2 {
			k = stepLease
		}
		st := step{Kind: k}
		switch k {
		case stepSend:
			for range 1 + r.IntN(2) {
				st.Sends = append(st.Sends, s.drawSend(r, r.IntN(len(s.Intents)), false))
			}
			st.Background = r.IntN(4) == 0
		case stepRetention:
			retentionJumps++
		case stepPerson:
			st.Action = pick(r, []string{actLookup, actCloseSucceeded, actCloseFailed, actCloseNotExecute}, []int{4, 2, 2, 2})
			st.Pick = r.IntN(8)
		case stepWorker:
			st.Workers = 1 + r.IntN(2)
			if r.IntN(5) < 2 {
				st.Crash = jobsCrashPoint(r)
			}
		}
		if k == stepRetention && background {
			// Nothing is still at the provider a day later: requests end first.
			s.Steps = append(s.Steps, step{Kind: stepJoin})
			background = false
		}
		background = background || st.Background
		s.Steps = append(s.Steps, st)
	}
	if jobs {
		// Jobs run at least once, a worker dying at a crash point drawn for the seed.
		s.Steps = append(s.Steps, step{Kind: stepWorker, Workers: 1, Crash: jobsCrashPoint(r)})
	}
}

func jobsCrashPoint(r *rand.Rand) string {
	return jobs.CrashPoints[r.IntN(len(jobs.CrashPoints))]
}

func (s *schedule) drawSend(r *rand.Rand, i int, first bool) send {
	sd := send{Intent: i, Copies: pick(r, []int{1, 2, 3}, []int{5, 3, 2}), Variant: same}
	if !first {
		sd.Variant = pick(r, []string{same, otherParams, invalid}, []int{8, 1, 1})
	}
	if s.Intents[i].Kind != ops.KindLLMJob && r.IntN(7) == 0 {
		sd.Crash = pick(r, []string{crashBeforeSend, crashAfterSend}, []int{1, 2})
	}
	return sd
}

// String prints the schedule so a failing seed can be read and rerun.
func (s *schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d (job resend after an uncertain attempt: %v)\n", s.Seed, s.JobRetry)
	for _, t := range s.Tenants {
		mode := "interactive"
		if t.Batch {
			mode = "batch"
		}
		fmt.Fprintf(&b, "  tenant %s, LLM policy %s\n", t.Name, mode)
	}
	for _, in := range s.Intents {
		t := s.Tenants[in.Tenant].Name
		switch in.Kind {
		case ops.KindRefund:
			fmt.Fprintf(&b, "  %s refund: %s order %s, %d of payment %s (%d)\n", in.Name, t, in.Order, in.Cents, in.Payment, in.PaymentCents)
		case ops.KindLLMCall:
			fmt.Fprintf(&b, "  %s llm call: %s key %s, stream %v\n", in.Name, t, in.Key, in.Stream)
		default:
			fmt.Fprintf(&b, "  %s job: %s keys %v on one document\n", in.Name, t, in.JobKeys)
		}
	}
	for _, f := range s.StripeFaults {
		fmt.Fprintf(&b, "  stripe %s %s call %v: %s", f.Method, f.Path, f.Calls, f.Kind)
		if f.Delay > 0 {
			fmt.Fprintf(&b, " %s", f.Delay)
		}
		b.WriteString("\n")
	}
	for _, f := range s.LLMFaults {
		fmt.Fprintf(&b, "  llm call %v: %s", f.Calls, f.Kind)
		if f.Delay > 0 {
			fmt.Fprintf(&b, " delay %s", f.Delay)
		}
		if f.Kind == fake.LLMFaultDropStream {
			fmt.Fprintf(&b, " after %d chunks", f.Chunk)
		}
		if f.Lag > 0 {
			fmt.Fprintf(&b, " stored %s late", f.Lag)
		}
		b.WriteString("\n")
	}
	for i, st := range s.Steps {
		fmt.Fprintf(&b, "  %2d. %s", i+1, st.Kind)
		switch st.Kind {
		case stepSend:
			for _, sd := range st.Sends {
				fmt.Fprintf(&b, " [%s x%d %s", s.Intents[sd.Intent].Name, sd.Copies, sd.Variant)
				if sd.Crash != "" {
					fmt.Fprintf(&b, ", first dies %s", sd.Crash)
				}
				b.WriteString("]")
			}
			if st.Background {
				b.WriteString(" in the background")
			}
		case stepPerson:
			fmt.Fprintf(&b, " %s on queue row %d", st.Action, st.Pick)
		case stepWorker:
			fmt.Fprintf(&b, " x%d", st.Workers)
			if st.Crash != "" {
				fmt.Fprintf(&b, ", first dies at %s", st.Crash)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
