package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// envList is vars as os.Environ gives them, in the order of their names.
func envList(vars map[string]string) []string {
	var out []string
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// run runs the command line like the binary does and returns its exit status and output.
func run(t *testing.T, args []string, vars map[string]string, stdin string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, envList(vars), strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func TestServeOnPortZero(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0"},
		env(map[string]string{"DATABASE_URL": pgtest.URL(pgtest.NewDatabase(t))}), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := NewProgram(cfg, testLogger(t))
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/login": 200, "/ops": 303} {
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(p.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d\n%s", path, resp.StatusCode, want, body)
		}
		if path == "/login" && !strings.Contains(string(body), `data-testid="login-form"`) {
			t.Errorf("GET /login has no login form")
		}
	}

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := http.Get(p.URL() + "/healthz"); err == nil {
		t.Error("the server still answers after Close")
	}
}

func TestServeRefusesOldSchema(t *testing.T) {
	t.Parallel()
	pgtest.NewDatabase(t) // starts the test cluster
	ctx := context.Background()
	name := fmt.Sprintf("empty_%s", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_")))
	admin, err := pgx.Connect(ctx, pgtest.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a, err := pgx.Connect(ctx, pgtest.URL("postgres"))
		if err == nil {
			a.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			a.Close(ctx)
		}
	})
	vars := map[string]string{"DATABASE_URL": pgtest.URL(name)}

	code, _, stderr := run(t, []string{"serve", "--addr", "127.0.0.1:0"}, vars, "")
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "settle: ") || !strings.Contains(stderr, "--migrate") {
		t.Fatalf("serve on an empty schema: exit %d, stderr %q; want 1 and one line pointing to --migrate", code, stderr)
	}

	cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0", "--migrate"}, env(vars), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := NewProgram(cfg, testLogger(t))
	if err := p.Run(ctx); err != nil {
		t.Fatalf("serve --migrate: %v", err)
	}
	if err := p.DB.CheckSchema(ctx); err != nil {
		t.Errorf("schema after --migrate: %v", err)
	}
	p.Close()
}

func TestServeAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	code, _, stderr := run(t, []string{"serve", "--addr", addr}, map[string]string{"DATABASE_URL": pgtest.URL(pgtest.NewDatabase(t))}, "")
	want := "settle: listen on " + addr + ": address already in use; choose another with --addr or SETTLE_ADDR\n"
	if code != 1 || stderr != want {
		t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
}

func TestCommandLineMistakes(t *testing.T) {
	t.Parallel()
	url := map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:1/db"}
	for _, tc := range []struct {
		args []string
		vars map[string]string
		want string
	}{
		{[]string{"frobnicate"}, url, `unknown command "frobnicate"`},
		{[]string{}, url, "no command"},
		{[]string{"serve", "--port", "80"}, url, "flag provided but not defined"},
		{[]string{"serve", "extra"}, url, "unexpected argument"},
		{[]string{"serve"}, nil, "DATABASE_URL is not set"},
		{[]string{"serve"}, map[string]string{"DATABASE_URL": "postgres://u:secret@host:notaport/db"}, "DATABASE_URL is malformed"},
		{[]string{"serve", "--addr", "nonsense"}, url, "not host:port"},
		{[]string{"serve"}, map[string]string{"DATABASE_URL": url["DATABASE_URL"], "SETTLE_LOG_LEVEL": "loud"}, "SETTLE_LOG_LEVEL"},
		{[]string{"user", "remove"}, url, "unknown command"},
		{[]string{"user", "add", "--email", "a@b.example"}, url, "--role"},
		{[]string{"user", "add", "--email", "a@b.example", "--role", "root"}, url, "--role"},
		{[]string{"token", "add"}, url, "--tenant"},
		{[]string{"token", "revoke"}, url, "--id is required"},
		{[]string{"token", "revoke", "--id", "x"}, url, "invalid value"},
		{[]string{"token", "remove"}, url, "unknown command"},
		{[]string{"user", "list"}, url, "unknown command"},
		{[]string{"serve"}, map[string]string{"DATABASE_URL": url["DATABASE_URL"], "SETTLE_LLM_KEY_SCOPE": "person"}, "SETTLE_LLM_KEY_SCOPE"},
		{[]string{"serve"}, map[string]string{"DATABASE_URL": url["DATABASE_URL"], "SETTLE_LLM_KEY_SCOPE": "tenant,=user"}, "SETTLE_LLM_KEY_SCOPE"},
		{[]string{"serve"}, map[string]string{"DATABASE_URL": url["DATABASE_URL"], "SETTLE_LLM_STORE": "maybe"}, "SETTLE_LLM_STORE"},
	} {
		code, stdout, stderr := run(t, tc.args, tc.vars, "")
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "settle: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("settle %v: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, stderr, tc.want)
		}
		if strings.Contains(stderr, "secret") {
			t.Errorf("settle %v printed the database password: %q", tc.args, stderr)
		}
	}
}

func TestUnreachableDatabaseIsOneLine(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	code, _, stderr := run(t, []string{"migrate"}, map[string]string{"DATABASE_URL": "postgres://u@" + addr + "/db?connect_timeout=2"}, "")
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "unreachable") {
		t.Fatalf("exit %d, stderr %q; want 1 and one line saying unreachable", code, stderr)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	code, stdout, _ := run(t, []string{"help"}, nil, "")
	if code != 0 || !strings.Contains(stdout, "token add") {
		t.Fatalf("help: exit %d\n%s", code, stdout)
	}
}

func TestTokenAdd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(pgtest.NewDatabase(t))
	code, stdout, stderr := run(t, []string{"token", "add", "--tenant", "acme"}, map[string]string{"DATABASE_URL": url}, "")
	if code != 0 {
		t.Fatalf("token add: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	token := lines[len(lines)-1]
	db, err := pg.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tn, err := db.TenantByToken(ctx, token)
	if err != nil || tn.Name != "acme" {
		t.Fatalf("TenantByToken(last line %q) = %v, %v", token, tn, err)
	}
	var audited int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'token.add' AND actor = 'cli'`).Scan(&audited); err != nil || audited != 1 {
		t.Fatalf("%d token.add audit rows by cli (%v)", audited, err)
	}

	code, _, stderr = run(t, []string{"token", "add", "--tenant", "Not Valid"}, map[string]string{"DATABASE_URL": url}, "")
	if code != 1 || !strings.HasPrefix(stderr, "settle: Tenant name") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("bad tenant name: exit %d, stderr %q", code, stderr)
	}

	// list shows the token by its first characters only; revoke stops it.
	code, stdout, stderr = run(t, []string{"token", "list"}, map[string]string{"DATABASE_URL": url}, "")
	if code != 0 || !strings.Contains(stdout, token[:8]+"…") || !strings.Contains(stdout, "active") || strings.Contains(stdout, token[8:]) {
		t.Fatalf("token list: exit %d: %s%s", code, stdout, stderr)
	}
	tokens, err := accountstore.New(db).Tokens(ctx)
	if err != nil || len(tokens) != 1 {
		t.Fatalf("tokens %v, %v", tokens, err)
	}
	id := strconv.FormatInt(tokens[0].ID, 10)
	code, stdout, stderr = run(t, []string{"token", "revoke", "--id", id}, map[string]string{"DATABASE_URL": url}, "")
	if code != 0 || !strings.Contains(stdout, "revoked "+token[:8]) {
		t.Fatalf("token revoke: exit %d: %s%s", code, stdout, stderr)
	}
	if _, err := db.TenantByToken(ctx, token); ops.ErrorCode(err) != ops.EUNAUTHORIZED {
		t.Fatalf("a revoked token still resolves: %v", err)
	}
	if _, stdout, _ = run(t, []string{"token", "list"}, map[string]string{"DATABASE_URL": url}, ""); !strings.Contains(stdout, "revoked 20") {
		t.Errorf("token list after the revocation:\n%s", stdout)
	}
	code, _, stderr = run(t, []string{"token", "revoke", "--id", "999999"}, map[string]string{"DATABASE_URL": url}, "")
	if code != 1 || stderr != "settle: No API token with id 999999.\n" {
		t.Errorf("revoke an unknown id: exit %d, stderr %q", code, stderr)
	}
}

func TestUserAddReadsPasswordFromStdin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(pgtest.NewDatabase(t))
	vars := map[string]string{"DATABASE_URL": url}
	args := []string{"user", "add", "--email", "oncall@example.com", "--role", "oncall"}

	code, stdout, stderr := run(t, args, vars, "a long secret phrase\nignored second line\n")
	if code != 0 || !strings.Contains(stdout, "oncall@example.com") {
		t.Fatalf("user add: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	db, err := pg.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	u, err := accountstore.New(db).Authenticate(ctx, "oncall@example.com", "a long secret phrase")
	if err != nil || u.Role != desk.RoleOncall {
		t.Fatalf("Authenticate = %v, %v", u, err)
	}

	code, _, stderr = run(t, args, vars, "another long phrase\n")
	if code != 1 || !strings.Contains(stderr, "already exists") {
		t.Errorf("duplicate user: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run(t, []string{"user", "add", "--email", "b@example.com", "--role", "support"}, vars, "short\n")
	if code != 1 || !strings.Contains(stderr, "at least 10") {
		t.Errorf("short password: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run(t, []string{"user", "add", "--email", "b@example.com", "--role", "support"}, vars, "")
	if code != 2 || !strings.Contains(stderr, "standard input") {
		t.Errorf("no password: exit %d, stderr %q", code, stderr)
	}
}

func TestFakeStripeCommandServesAndRefusesBadFaults(t *testing.T) {
	t.Parallel()
	code, _, stderr := run(t, []string{"fake", "stripe", "--faults", "POST /v1/refunds explode"}, nil, "")
	if code != 2 || !strings.Contains(stderr, "settle: fake stripe: --faults") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("bad faults: exit %d, stderr %q", code, stderr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out bytes.Buffer
	go func() {
		done <- Main(ctx, []string{"fake", "stripe", "--addr", addr}, envList(nil), strings.NewReader(""), &out, io.Discard)
	}()
	var resp *http.Response
	for i := 0; i < 100; i++ {
		if resp, err = http.Get("http://" + addr + "/_fake/ledger"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ledger: %d", resp.StatusCode)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestStripeTimeoutsMustFitTheCallersRequest(t *testing.T) {
	t.Parallel()
	wantServeRefused(t, []refusedEnv{
		{map[string]string{"SETTLE_REFUND_DEADLINE": "3m"}, "SETTLE_REFUND_DEADLINE=3m0s is longer"},
		{map[string]string{"SETTLE_STRIPE_TIMEOUT": "45s", "SETTLE_REFUND_DEADLINE": "30s"}, "SETTLE_STRIPE_TIMEOUT=45s is longer than"},
		{map[string]string{"SETTLE_STRIPE_TIMEOUT": "soon"}, "not a positive Go duration"},
		{map[string]string{"STRIPE_API_BASE": "ftp://x"}, "STRIPE_API_BASE"},
		{map[string]string{"SETTLE_OUTBOX_KEEP": "a week"}, `SETTLE_OUTBOX_KEEP="a week" is not a positive Go duration`},
		{map[string]string{"SETTLE_OUTBOX_KEEP": "-1h"}, "SETTLE_OUTBOX_KEEP"},
		{map[string]string{"SETTLE_ROLLUP_MINUTES_KEEP": "24h"}, "SETTLE_ROLLUP_MINUTES_KEEP=24h0m0s is shorter than 48h0m0s"},
	})
}

// refusedEnv is a setting serve must refuse, and what its one line must say.
type refusedEnv struct {
	vars map[string]string
	want string
}

// wantServeRefused starts serve with each case's variables (and a database it never
// reaches) and wants exit 2 with one line saying what the case wants.
func wantServeRefused(t *testing.T, cases []refusedEnv) {
	t.Helper()
	for _, c := range cases {
		c.vars["DATABASE_URL"] = "postgres://u@127.0.0.1:1/x"
		code, _, stderr := run(t, []string{"serve"}, c.vars, "")
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", c.vars, code, stderr, c.want)
		}
	}
}

func TestTuneGCLeavesAnOperatorsChoice(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	tuneGC(func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC set, the GC target became %d, want it left at 100", got)
	}
	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Fatalf("without GOGC, the GC target is %d, want %d", got, gcPercent)
	}
}
