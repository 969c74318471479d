package testworld

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops/mcptool"
)

// ToolResult reads what a refund tool answered: its structured answer and its text, the
// two an agent's model sees. The stdio and HTTP MCP tests read results the same way.
func ToolResult(t testing.TB, tool string, res *mcp.CallToolResult) (mcptool.Answer, string) {
	t.Helper()
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	var ans mcptool.Answer
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &ans); err != nil {
			t.Fatalf("%s: structured content %s: %v", tool, b, err)
		}
	}
	return ans, text.String()
}
