package desk_test

import (
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/jobs"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/ops/refund"
)

// TestCustomerStatusNeverClaimsAnOutcomeWhileUnknown: every kind's customer wording, and
// the wording of a kind nobody registered, says nothing of an outcome nobody knows
// (ops rule 12).
func TestCustomerStatusNeverClaimsAnOutcomeWhileUnknown(t *testing.T) {
	kinds := ops.NewLedger(nil, ops.SystemClock{})
	kinds.Register(refund.Kind(), llm.Kind(), jobs.Kind(false))
	for _, s := range []ops.Status{ops.StatusUnknown, ops.StatusExpired, ops.StatusInProgress, ops.StatusReceived} {
		for _, k := range []ops.Kind{ops.KindRefund, ops.KindLLMCall, ops.KindLLMJob, "unregistered"} {
			c := kinds.Kind(k).CustomerStatus(&ops.Operation{Status: s, Kind: k, AmountCents: 3800, Currency: "usd"}, nil)
			low := strings.ToLower(c.Sentence + " " + c.Headline)
			for _, word := range []string{"succeeded", "failed", "issued", "did not go through", "completed"} {
				if strings.Contains(low, word) {
					t.Errorf("%s %s says %q: %q", k, s, word, c.Sentence)
				}
			}
			if c.Known {
				t.Errorf("%s %s is marked known", k, s)
			}
		}
	}
	if c := refund.CustomerStatus(&ops.Operation{Status: ops.StatusUnknown, Kind: ops.KindRefund}, nil); refund.UnknownSentence !=
		"We can't confirm your refund yet. A colleague is checking and will reply in this chat." || c.Sentence != refund.UnknownSentence {
		t.Errorf("unknown refund sentence = %q", c.Sentence)
	}
	if c := refund.CustomerStatus(&ops.Operation{Status: ops.StatusSucceeded, Kind: ops.KindRefund, AmountCents: 3800, Currency: "usd"}, nil); !c.Known ||
		!strings.Contains(c.Sentence, "38.00 USD has been issued") {
		t.Errorf("succeeded refund = %+v", c)
	}
}

// TestCheckNotExecuted: a close as not executed needs the key retention passed and no
// attempt that may still be sending (ops rule 11).
func TestCheckNotExecuted(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Minute), now.Add(time.Hour)
	done := now.Add(-time.Hour)
	cases := []struct {
		name string
		op   ops.Operation
		atts []ops.Attempt
		code string
	}{
		{"retention passed", ops.Operation{Status: ops.StatusUnknown, RetryUntil: &past}, []ops.Attempt{{N: 1, FinishedAt: &done}}, ""},
		{"key still retained", ops.Operation{Status: ops.StatusUnknown, RetryUntil: &future}, nil, ops.EINVALID},
		{"never sent", ops.Operation{Status: ops.StatusUnknown}, nil, ops.EINVALID},
		{"lease live", ops.Operation{Status: ops.StatusInProgress, RetryUntil: &past, LeaseUntil: &future}, nil, ops.ECONFLICT},
		{"attempt without result", ops.Operation{Status: ops.StatusExpired, RetryUntil: &past}, []ops.Attempt{{N: 2}}, ops.ECONFLICT},
		// ops rule 11: an attempt whose lease ran out may still be sending for a margin after its start.
		{"taken over, may still send", ops.Operation{Status: ops.StatusExpired, RetryUntil: &past},
			[]ops.Attempt{{N: 2, StartedAt: past, FinishedAt: &now, ErrorCode: ops.ErrorLeaseExpired}}, ops.ECONFLICT},
		{"taken over, send over", ops.Operation{Status: ops.StatusExpired, RetryUntil: &past},
			[]ops.Attempt{{N: 1, StartedAt: now.Add(-ops.DefaultLimits.RetentionMargin), FinishedAt: &done, ErrorCode: ops.ErrorLeaseExpired}}, ""},
		{"closed", ops.Operation{Status: ops.StatusFailed, RetryUntil: &past, ClosedBy: "alice"}, nil, ops.ECONFLICT},
	}
	for _, c := range cases {
		if got := ops.ErrorCode(ops.CheckNotExecuted(&c.op, c.atts, now, ops.DefaultLimits)); got != c.code {
			t.Errorf("%s: %q, want %q", c.name, got, c.code)
		}
	}
}

func TestRolesInclude(t *testing.T) {
	if !desk.RoleAdmin.AtLeast(desk.RoleOncall) || desk.RoleSupport.AtLeast(desk.RoleOncall) || desk.Role("root").AtLeast(desk.RoleSupport) {
		t.Fatal("role order is wrong")
	}
}
