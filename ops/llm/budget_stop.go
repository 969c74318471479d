package llm

import "time"

// A tenant is stopped by what is left of its budget, rather than a client having sent one
// oversize call, while more than half of its client requests of one kind in the last
// TooSmallWindow, and at least TooSmallMinRequests of them, were refused with
// ReasonBudgetTooSmall. The built-in rule TenantLLMBudgetSpent of that reason judges the same
// counts over the same window, and the tenants page shows the same tenants refused.
//
// The window is short because a stop's refusals must outnumber the calls the window still
// holds from before it: over ten minutes, a tenant that made 10 calls a second until its
// stop was told five minutes late, over two it is told within two whatever it sent before.
// What it gives up: a stopped tenant whose clients send fewer than TooSmallMinRequests
// requests in two minutes is not told of (its stop costs few calls).
const (
	TooSmallWindow      = 2 * time.Minute
	TooSmallMinRequests = 3
)

// StoppedByWhatIsLeft says whether refused of requests (one tenant's, of one kind, in
// TooSmallWindow) refused with ReasonBudgetTooSmall stop the tenant.
func StoppedByWhatIsLeft(requests, refused int64) bool {
	return requests >= TooSmallMinRequests && refused*2 > requests
}
