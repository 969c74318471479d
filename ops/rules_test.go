package ops_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

func TestTransitionTable(t *testing.T) {
	allowed := map[[2]ops.Status]bool{
		{ops.StatusReceived, ops.StatusInProgress}:   true,
		{ops.StatusReceived, ops.StatusFailed}:       true,
		{ops.StatusReceived, ops.StatusUnknown}:      true,
		{ops.StatusReceived, ops.StatusExpired}:      true,
		{ops.StatusInProgress, ops.StatusInProgress}: true,
		{ops.StatusInProgress, ops.StatusSucceeded}:  true,
		{ops.StatusInProgress, ops.StatusFailed}:     true,
		{ops.StatusInProgress, ops.StatusUnknown}:    true,
		{ops.StatusInProgress, ops.StatusExpired}:    true,
		{ops.StatusUnknown, ops.StatusSucceeded}:     true,
		{ops.StatusUnknown, ops.StatusFailed}:        true,
		{ops.StatusUnknown, ops.StatusExpired}:       true,
		{ops.StatusExpired, ops.StatusSucceeded}:     true,
		{ops.StatusExpired, ops.StatusFailed}:        true,
		// A refund the provider accepted and later failed; only its own record does this.
		{ops.StatusSucceeded, ops.StatusFailed}: true,
	}
	for _, from := range ops.Statuses {
		for _, to := range ops.Statuses {
			t.Run(string(from)+"→"+string(to), func(t *testing.T) {
				want := allowed[[2]ops.Status{from, to}]
				if got := ops.CanTransition(from, to); got != want {
					t.Fatalf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
				}
				err := ops.CheckTransition(from, to)
				if want != (err == nil) {
					t.Fatalf("CheckTransition(%s, %s) = %v", from, to, err)
				}
				if err != nil && ops.ErrorCode(err) != ops.EINVALID {
					t.Fatalf("code %s, want invalid", ops.ErrorCode(err))
				}
			})
		}
	}
}

func TestCheckSendRefusals(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	live, past, future := now.Add(time.Minute), now.Add(-time.Second), now.Add(time.Hour)
	lim := ops.DefaultLimits
	cases := []struct {
		name string
		op   ops.Operation
		ok   bool
	}{
		{"leased in progress", ops.Operation{Status: ops.StatusInProgress, LeaseOwner: "w", LeaseUntil: &live, RetryUntil: &future}, true},
		{"provider keeps no keys", ops.Operation{Status: ops.StatusInProgress, LeaseOwner: "w", LeaseUntil: &live}, true},
		{"unknown", ops.Operation{Status: ops.StatusUnknown, LeaseOwner: "w", LeaseUntil: &live}, false},
		{"expired", ops.Operation{Status: ops.StatusExpired, LeaseOwner: "w", LeaseUntil: &live}, false},
		{"succeeded", ops.Operation{Status: ops.StatusSucceeded}, false},
		{"failed", ops.Operation{Status: ops.StatusFailed}, false},
		{"received, not claimed", ops.Operation{Status: ops.StatusReceived}, false},
		{"past retry_until", ops.Operation{Status: ops.StatusInProgress, LeaseOwner: "w", LeaseUntil: &live, RetryUntil: &past}, false},
		{"lease of another worker", ops.Operation{Status: ops.StatusInProgress, LeaseOwner: "x", LeaseUntil: &live}, false},
		{"lease ran out", ops.Operation{Status: ops.StatusInProgress, LeaseOwner: "w", LeaseUntil: &past}, false},
		{"budget spent", ops.Operation{Status: ops.StatusInProgress, LeaseOwner: "w", LeaseUntil: &live, Attempts: 6}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ops.CheckSend(&c.op, "w", now, lim)
			if (err == nil) != c.ok {
				t.Fatalf("CheckSend = %v, want ok=%v", err, c.ok)
			}
			if err != nil && ops.ErrorCode(err) != ops.ECONFLICT {
				t.Fatalf("code %s, want conflict", ops.ErrorCode(err))
			}
		})
	}
}

func TestCheckCloseNeedsProviderWordForSuccess(t *testing.T) {
	now := time.Now()
	op := &ops.Operation{ID: "x", Status: ops.StatusUnknown}
	if err := ops.CheckClose(op, ops.StatusSucceeded, ops.Evidence{Kind: ops.EvidenceNote, Summary: "customer says fine"}, now); err == nil {
		t.Fatal("a note without the provider's record closed an operation as succeeded")
	}
	if err := ops.CheckClose(op, ops.StatusSucceeded, ops.Evidence{Kind: ops.EvidenceNote, Summary: "seen in Stripe", ProviderRef: "re_1"}, now); err != nil {
		t.Fatalf("note with a refund id: %v", err)
	}
	if err := ops.CheckClose(op, ops.StatusSucceeded, ops.Evidence{Kind: ops.EvidenceLookup, ProviderRef: "re_1"}, now); err != nil {
		t.Fatalf("lookup: %v", err)
	}
	if err := ops.CheckClose(op, ops.StatusFailed, ops.Evidence{}, now); err == nil {
		t.Fatal("closed without evidence")
	}
	if err := ops.CheckClose(op, ops.StatusExpired, ops.Evidence{Kind: ops.EvidenceLookup}, now); err == nil {
		t.Fatal("closed to a non-final status")
	}
	lease := now.Add(time.Minute)
	sending := &ops.Operation{ID: "y", Status: ops.StatusInProgress, LeaseUntil: &lease}
	if err := ops.CheckClose(sending, ops.StatusFailed, ops.Evidence{Kind: ops.EvidenceLookup}, now); ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("closing while a worker sends: %v", err)
	}
}

func TestNextStatus(t *testing.T) {
	now := time.Now()
	future, past := now.Add(time.Hour), now.Add(-time.Hour)
	lim := ops.DefaultLimits
	retry := ops.Policy{RetryUncertain: true}
	batch := ops.Policy{RetryUncertain: false}
	cases := []struct {
		name    string
		op      ops.Operation
		outcome ops.Outcome
		pol     ops.Policy
		want    ops.Status
		retry   bool
	}{
		{"ok", ops.Operation{Attempts: 1}, ops.OutcomeOK, retry, ops.StatusSucceeded, false},
		{"refused", ops.Operation{Attempts: 1}, ops.OutcomeInvalid, retry, ops.StatusFailed, false},
		{"saved 500 is unknown at once", ops.Operation{Attempts: 1, RetryUntil: &future}, ops.OutcomeServerError, retry, ops.StatusUnknown, false},
		{"timeout retries", ops.Operation{Attempts: 1, RetryUntil: &future}, ops.OutcomeTimeout, retry, ops.StatusInProgress, true},
		{"timeout in a batch job is unknown", ops.Operation{Attempts: 1}, ops.OutcomeTimeout, batch, ops.StatusUnknown, false},
		{"429 retries", ops.Operation{Attempts: 1}, ops.OutcomeRateLimited, batch, ops.StatusInProgress, true},
		{"409 key in use retries", ops.Operation{Attempts: 2, RetryUntil: &future}, ops.OutcomeKeyInUse, retry, ops.StatusInProgress, true},
		{"budget spent is unknown", ops.Operation{Attempts: 6, RetryUntil: &future}, ops.OutcomeTimeout, retry, ops.StatusUnknown, false},
		{"past retention expires", ops.Operation{Attempts: 2, RetryUntil: &past}, ops.OutcomeTimeout, retry, ops.StatusExpired, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, r := ops.NextStatus(&c.op, c.outcome, c.pol, now, lim)
			if got != c.want || r != c.retry {
				t.Fatalf("NextStatus = %s, %v; want %s, %v", got, r, c.want, c.retry)
			}
		})
	}
}

// rule 4: backoff has full jitter and honours Retry-After.
func TestBackoffHasJitterAndHonoursRetryAfter(t *testing.T) {
	lim := ops.DefaultLimits
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[time.Duration]bool{}
	for i := 0; i < 50; i++ {
		d := ops.Backoff(3, 0, lim, r)
		if d < 0 || d > lim.BaseBackoff<<2 {
			t.Fatalf("backoff %v outside [0, %v]", d, lim.BaseBackoff<<2)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatalf("backoff has no jitter: %d distinct values in 50", len(seen))
	}
	if d := ops.Backoff(1, 7*time.Second, lim, r); d < 7*time.Second {
		t.Fatalf("backoff %v ignores Retry-After of 7s", d)
	}
	if d := ops.Backoff(40, 0, lim, r); d > lim.MaxBackoff {
		t.Fatalf("backoff %v above the cap %v", d, lim.MaxBackoff)
	}
}
