package fake_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/fake"
)

// TestLLMRecordsTheOutputCapItWasSent: the fake's ledger keeps the output cap each request
// named, as a provider bills no more output than it, so that a test of a gateway that sets
// the cap itself reads what the provider got; a request that names none is recorded with 0
// and generates the fake's default length.
func TestLLMRecordsTheOutputCapItWasSent(t *testing.T) {
	t.Parallel()
	l, base := startLLM(t, fake.LLMOptions{})
	c := &http.Client{}
	for _, body := range []string{
		strings.Replace(question, `"temperature"`, `"max_completion_tokens":7,"max_tokens":90,"temperature"`, 1),
		strings.Replace(question, `"temperature"`, `"max_tokens":5,"temperature"`, 1),
		question,
	} {
		if resp := chat(t, c, base, body); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", body, resp.StatusCode)
		}
	}
	gens := l.Generations()
	if len(gens) != 3 {
		t.Fatalf("%d generations, want 3", len(gens))
	}
	for i, want := range []struct{ named, tokens int }{{7, 7}, {5, 5}, {0, 24}} {
		if g := gens[i]; g.MaxOutputTokens != want.named || g.CompletionTokens != want.tokens {
			t.Errorf("generation %d: cap %d, %d tokens; want cap %d, %d tokens", i, g.MaxOutputTokens, g.CompletionTokens, want.named, want.tokens)
		}
	}
}
