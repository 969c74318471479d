package fake

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// choice is one generated answer.
type choice struct {
	content  string
	tokens   []string
	toolName string
	toolArgs string
	toolID   string
}

// forcedTool returns the function the request forces a call of: the named one, or the
// first tool when tool_choice is "required". "" means the model answers in text.
func forcedTool(req chatRequest) string {
	if len(req.Tools) == 0 || len(req.ToolChoice) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(req.ToolChoice, &s) == nil {
		if s == "required" {
			return req.Tools[0].Function.Name
		}
		return ""
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(req.ToolChoice, &named) == nil {
		return named.Function.Name
	}
	return ""
}

// vocabulary is what the fake says: plain words, one token each.
var vocabulary = strings.Fields(`the order was refunded and your request is being checked by our team today we
will send an update once the payment provider confirms it please keep this message for your records thank you for
waiting summary customer asked about delivery status agent explained next steps ticket closed`)

// generate makes a deterministic answer of n tokens from seed.
func generate(seed uint64, n int, tool string) choice {
	r := rand.New(rand.NewPCG(seed, seed^0xfa4e))
	var c choice
	if tool != "" {
		c.toolName, c.toolID = tool, fmt.Sprintf("call_%016x", r.Uint64())
		args := fmt.Sprintf(`{"note":"%s"}`, vocabulary[r.IntN(len(vocabulary))])
		// Arguments arrive in three pieces, as real streams split them.
		third := len(args) / 3
		c.tokens = []string{args[:third], args[third : 2*third], args[2*third:]}
		c.toolArgs = args
		return c
	}
	c.tokens = make([]string, n)
	var b strings.Builder
	for i := range n {
		w := vocabulary[r.IntN(len(vocabulary))]
		if i > 0 {
			w = " " + w
		} else {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		if i == n-1 {
			w += "."
		}
		c.tokens[i] = w
		b.WriteString(w)
	}
	c.content = b.String()
	return c
}

// contentSeed hashes the request without its transport fields and its storage tags, so the
// same question gets the same answer streamed or not, stored or not.
func contentSeed(body []byte) uint64 {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(body, &m)
	delete(m, "stream")
	delete(m, "stream_options")
	delete(m, "user")
	delete(m, "store")
	delete(m, "metadata")
	b, _ := json.Marshal(m) // sorted keys
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[:8])
}

func hashMessages(model string, msgs []json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(model))
	for _, m := range msgs {
		h.Write(m)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// countPromptTokens counts words of message contents plus a few tokens per message, the
// way providers add framing tokens.
func countPromptTokens(msgs []json.RawMessage) int {
	n := 3
	for _, raw := range msgs {
		var m struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(raw, &m)
		n += 4
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			n += len(strings.Fields(s))
			continue
		}
		var parts []struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) == nil {
			for _, p := range parts {
				n += len(strings.Fields(p.Text))
			}
		}
	}
	return n
}
