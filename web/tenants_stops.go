package web

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/llm"
)

// refusalShares reads, for every tenant and kind with a request refused for reason in
// [from, to), its requests and those refused so, giving up after limit; ops/pg's DB is one.
type refusalShares interface {
	RefusalShares(ctx context.Context, reason string, from, to time.Time, limit time.Duration) ([]ops.RefusalShare, error)
}

// tooSmallStops are the tenants whose requests of a kind were mostly refused in the last
// llm.TooSmallWindow because what is left of their budget cannot pay for them: stopped as
// surely as by a spent budget, though their spend is short of it, and the built-in rule
// TenantLLMBudgetSpent of reason llm_budget_too_small fires for the same counts (ops rule 8
// records each refusal with its reason). unread is true when the counts could not be read,
// which the page says rather than showing such a tenant within its budget. Without a tenant
// with a budget among days nothing is read: no call of theirs is refused so.
func (s *Server) tooSmallStops(ctx context.Context, now time.Time, days []ops.TenantDay) (stops map[int64]ops.RefusalShare, unread bool) {
	src, ok := s.Tenants.(refusalShares)
	budgeted := slices.ContainsFunc(days, func(d ops.TenantDay) bool { return d.Tenant.LLMBudgetMicros > 0 })
	if !ok || !budgeted {
		return nil, false
	}
	shares, err := src.RefusalShares(ctx, llm.ReasonBudgetTooSmall, now.Add(-llm.TooSmallWindow), now.Add(time.Nanosecond),
		s.SpendBound.OrDefault().Time)
	if err != nil {
		s.Logger.WarnContext(ctx, "the tenants page could not count the requests refused for what is left of a budget", "err", err)
		return nil, true
	}
	stops = map[int64]ops.RefusalShare{}
	for _, sh := range shares {
		if llm.StoppedByWhatIsLeft(sh.Requests, sh.Refused) && sh.Refused > stops[sh.TenantID].Refused {
			stops[sh.TenantID] = sh
		}
	}
	return stops, false
}

// tooSmallText says on a tenant's row why its calls are refused though its budget is not
// spent: what is left (when its spend was read whole), and how many of its requests asked
// more than that.
func tooSmallText(d ops.TenantDay, sh ops.RefusalShare, currency string) string {
	left := "what is left"
	if d.Read == ops.SpendWhole {
		left = ops.FormatMicrosExact(max(d.Tenant.LLMBudgetMicros-d.Spent, 0), currency) + " left"
	}
	return fmt.Sprintf("%s is less than its calls may cost: %d of its %d %s requests in the last %d min refused with %s. "+
		"Raise the budget, or have its client ask for fewer tokens.",
		left, sh.Refused, sh.Requests, sh.Kind, int(llm.TooSmallWindow/time.Minute), llm.ReasonBudgetTooSmall)
}
