package llm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
)

// TestAPurgedCallIsStillSpokenOfAsItsAPIs: once the purge deleted a call's request, its page,
// its close form and its lookup still go by the API its operation keeps, never by chat
// completions for want of a route (ops rule 12): a purged message still has nothing to look
// up and is closed with its message id, a purged response is still looked up among the
// stored responses, and the tenant's GET of a response still finds a purged one's operation.
func TestAPurgedCallIsStillSpokenOfAsItsAPIs(t *testing.T) {
	purged := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		api, provider, label string
		lookup               lookupWay
		route                string
	}{
		{"messages", "anthropic", "Message id", lookupUsageOnly, MessagesRoute},
		{"responses", "openai", "Response id", lookupResponseByID, responsesRoute},
		{"embeddings", "openai", "Request id (embeddings have no id of their own)", lookupUsageOnly, embeddingsRoute},
		{"chat_completions", "openai", "Completion id", lookupStoredCompletion, chatRoute},
	} {
		op := &ops.Operation{ID: "op-1", TenantID: 7, Kind: ops.KindLLMCall, Provider: c.provider, Status: ops.StatusUnknown,
			API: c.api, Model: "m", PurgedAt: &purged}
		if got := RecordOf(op).Label; got != c.label {
			t.Errorf("purged %s: its close form names the %q, want the %q", c.api, got, c.label)
		}
		if got := lookupOf(op); got != c.lookup {
			t.Errorf("purged %s: looked up as %v, want %v", c.api, got, c.lookup)
		}
		if got := routeOf(op); got != c.route {
			t.Errorf("purged %s: route %q, want %q", c.api, got, c.route)
		}
		said := (*Lookups)(nil).Available(context.Background(), op)
		if c.api != "chat_completions" && strings.Contains(said, "completion") {
			t.Errorf("purged %s: its lookup speaks of completions: %q", c.api, said)
		}
	}
}
