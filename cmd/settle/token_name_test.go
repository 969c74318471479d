package main

import (
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// TestTokenAddRefusesANameItCouldNotShow: a token's name is shown on one line of 'settle
// token list' and of the admin page. A name with a control character (a newline that
// splits the list's row, an escape sequence a terminal would obey, a NUL the database
// refuses) is a mistake on the command line: one line says which, the exit status is 1,
// and no tenant, token or audit row is made.
func TestTokenAddRefusesANameItCouldNotShow(t *testing.T) {
	t.Parallel()
	db, url := pgtest.NewWithURL(t)
	vars := map[string]string{"DATABASE_URL": url}
	for _, name := range []string{"agent\nshop  stl_fake…  active", "agent\x1b[2K", "agent\x00", "agent\xff"} {
		code, stdout, stderr := run(t, []string{"token", "add", "--tenant", "shop", "--name", name}, vars, "")
		if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "settle: ") || strings.Count(stderr, "\n") != 1 ||
			!strings.Contains(stderr, "name") || strings.Contains(stderr, "nternal") || strings.Contains(stderr, "SQLSTATE") {
			t.Errorf("token add --name %q: exit %d, stdout %q, stderr %q; want 1 and one line about the name", name, code, stdout, stderr)
		}
	}
	var tenants, tokens, audited int
	if err := db.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM tenants), (SELECT count(*) FROM api_tokens), (SELECT count(*) FROM audit_log)`).Scan(&tenants, &tokens, &audited); err != nil {
		t.Fatal(err)
	}
	if tenants+tokens+audited != 0 {
		t.Errorf("refused names left %d tenants, %d tokens, %d audit rows; want none", tenants, tokens, audited)
	}
}
