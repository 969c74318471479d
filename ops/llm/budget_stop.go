package llm

import "time"

// A tenant is stopped by what is left of its budget, rather than a client having sent one
// oversize call, while more than half of its client requests of one kind in the last
// TooSmallWindow, and at least TooSmallMinRequests of them, were refused with
// ReasonBudgetTooSmall. The built-in rule TenantLLMBudgetSpent of that reason judges the same
// counts over the same window, and the tenants page shows the same tenants refused.
const (
	TooSmallWindow      = 10 * time.Minute
	TooSmallMinRequests = 3
)

// StoppedByWhatIsLeft says whether refused of requests (one tenant's, of one kind, in
// TooSmallWindow) refused with ReasonBudgetTooSmall stop the tenant.
func StoppedByWhatIsLeft(requests, refused int64) bool {
	return requests >= TooSmallMinRequests && refused*2 > requests
}
