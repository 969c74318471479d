package main

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestMCPStdioTokenMistakesAreOneLineNamingTheSetting: the token an operator pastes into an
// agent's configuration often carries a newline or a space; it is the same token, taken as
// /mcp over HTTP takes it. A token that is no live token stops the server at start in one
// line that names SETTLE_MCP_TOKEN, so the operator knows which setting to fix, and blank
// is as good as unset.
func TestMCPStdioTokenMistakesAreOneLineNamingTheSetting(t *testing.T) {
	t.Parallel()
	db, url := pgtest.NewWithURL(t)
	tenant, err := db.EnsureTenant(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	token, err := db.CreateToken(context.Background(), tenant.ID, "agent")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		token string
		code  int
		want  string
	}{
		{token + "\n", 0, ""},
		{" " + token + " ", 0, ""},
		{"  \n", 2, "set SETTLE_MCP_TOKEN"},
		{"Bearer " + token, 1, "SETTLE_MCP_TOKEN"},
		{"stl_nope", 1, "SETTLE_MCP_TOKEN"},
	} {
		code, stdout, stderr := run(t, []string{"mcp", "--stdio"}, map[string]string{"DATABASE_URL": url, "SETTLE_MCP_TOKEN": c.token}, "")
		if c.code == 0 {
			if code != 0 || stdout != "" {
				t.Errorf("token %q: exit %d, stdout %q, stderr %q; want it served", c.token[:12], code, stdout, stderr)
			}
			continue
		}
		if code != c.code || stdout != "" || !strings.HasPrefix(stderr, "settle: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("token %q: exit %d, stderr %q; want %d and one line with %q", c.token[:min(len(c.token), 12)], code, stderr, c.code, c.want)
		}
	}
}
