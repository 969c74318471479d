package fake

import (
	"net/http"
	"regexp"
)

// accountRe is the shape of a Stripe account id.
var accountRe = regexp.MustCompile(`^acct_[A-Za-z0-9]{1,250}$`)

// validAccount reports whether a Stripe-Account value names an account the fake serves: ""
// (the platform) or any well-formed acct_ id, each a connected account of its own.
func validAccount(account string) bool {
	return account == "" || accountRe.MatchString(account)
}

// accountLabel names an account in messages.
func accountLabel(account string) string {
	if account == "" {
		return "the platform account"
	}
	return "account " + account
}

// Call is one API request as the fake received it: enough for a test to check that every
// call made for a tenant went to that tenant's account.
type Call struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// Account is the request's Stripe-Account header, "" for the platform account.
	Account string `json:"account,omitempty"`
	Status  int    `json:"status"`
	Outcome string `json:"outcome"`
}

// maxCalls bounds the call log of a long-running fake (the demo's); the oldest half goes
// when it fills.
const maxCalls = 10_000

func (s *Stripe) recordCall(c Call) {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	if len(s.calls) >= maxCalls {
		s.calls = append(s.calls[:0], s.calls[maxCalls/2:]...)
	}
	s.calls = append(s.calls, c)
}

// Calls returns the API requests received so far, oldest first (the newest 10 000 at
// most); admin requests are not in it.
func (s *Stripe) Calls() []Call {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	return append([]Call(nil), s.calls...)
}

func (s *Stripe) adminCalls(w http.ResponseWriter, _ *http.Request) {
	calls := s.Calls()
	if calls == nil {
		calls = []Call{}
	}
	writeJSON(w, http.StatusOK, calls)
}
