package llm

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// assembleTokens streams n one-token chunks, each with a piece of content, of a tool call's
// arguments and of logprobs, into a new assembler and returns the completion and the bytes
// the assembly allocated.
func assembleTokens(t *testing.T, n int) (*completion, uint64) {
	t.Helper()
	chunks := make([][]byte, n)
	for i := range chunks {
		chunks[i] = fmt.Appendf(nil, `{"id":"chatcmpl-long","object":"chat.completion.chunk","created":5,"model":"m",`+
			`"choices":[{"index":0,"delta":{"content":"tok%05d ","tool_calls":[{"index":0,"function":{"arguments":"a%05d"}}]},`+
			`"logprobs":{"content":[{"token":"tok%05d","logprob":-0.5}]}}]}`, i, i, i)
	}
	a := newAssembler()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, c := range chunks {
		if _, _, err := a.add(c); err != nil {
			t.Fatal(err)
		}
	}
	c := a.completion()
	runtime.ReadMemStats(&after)
	return c, after.TotalAlloc - before.TotalAlloc
}

// A long streamed answer is assembled in work that grows with its length, not with its
// square: each token used to rebuild the whole content, the whole tool arguments and the
// whole logprobs list, so an answer of thousands of tokens cost the gateway megabytes of
// copying per call. Eight times the tokens may cost about eight times the bytes, never
// anywhere near sixty-four. The assembled answer is still every piece in order.
func TestALongStreamIsAssembledInLinearWork(t *testing.T) {
	const small, large = 500, 4000
	_, smallBytes := assembleTokens(t, small)
	c, largeBytes := assembleTokens(t, large)
	t.Logf("%d tokens: %d B allocated; %d tokens: %d B", small, smallBytes, large, largeBytes)
	if ratio := float64(largeBytes) / float64(smallBytes); ratio > 16 {
		t.Errorf("%d tokens allocated %d B, %d tokens %d B: %.1f times for 8 times the tokens",
			small, smallBytes, large, largeBytes, ratio)
	}
	msg := c.Choices[0].Message
	var want, wantArgs strings.Builder
	for i := range large {
		fmt.Fprintf(&want, "tok%05d ", i)
		fmt.Fprintf(&wantArgs, "a%05d", i)
	}
	if msg.Content == nil || *msg.Content != want.String() {
		t.Fatal("the assembled content is not every token in order")
	}
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Arguments != wantArgs.String() {
		t.Fatal("the assembled tool arguments are not every piece in order")
	}
	var lp struct {
		Content []struct{ Token string } `json:"content"`
	}
	if err := json.Unmarshal(c.Choices[0].Logprobs, &lp); err != nil || len(lp.Content) != large ||
		lp.Content[large-1].Token != fmt.Sprintf("tok%05d", large-1) {
		t.Fatalf("the assembled logprobs hold %d entries (%v), want %d in order", len(lp.Content), err, large)
	}
}
