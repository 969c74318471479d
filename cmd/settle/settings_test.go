package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// commandArgs is a valid command line of each command, as the table names them.
var commandArgs = map[string][]string{
	"serve": {"serve"}, "demo": {"demo"}, "migrate": {"migrate"}, "worker": {"worker"}, "reconcile": {"reconcile"},
	"retention run": {"retention", "run", "--dry-run"}, "mcp": {"mcp", "--stdio"},
	"user add":              {"user", "add", "--email", "sam@example.com", "--role", "admin"},
	"token add":             {"token", "add", "--tenant", "acme"},
	"token list":            {"token", "list"},
	"token revoke":          {"token", "revoke", "--id", "1"},
	"tenant stripe-account": {"tenant", "stripe-account", "acme", "acct_1"},
	"tenant approvals":      {"tenant", "approvals", "acme", "--min-cents", "5000"},
	"tenant budget":         {"tenant", "budget", "acme", "--budget", "25"},
	"tenant list":           {"tenant", "list"},
	"alerts export":         {"alerts", "export"},
	"fake stripe":           {"fake", "stripe"},
	"fake llm":              {"fake", "llm"},
	"fake anthropic":        {"fake", "anthropic"},
}

// validEnv is a valid value of every variable settle reads, each secret one holding the word
// SECRET, so a message that repeats it is easy to find.
var validEnv = map[string]string{
	"DATABASE_URL": "postgres://settle:SECRET@127.0.0.1:1/settle?application_name=SECRET", "SETTLE_DB_POOLER": "transaction",
	"SETTLE_ADDR": "127.0.0.1:8081", "SETTLE_DEMO_HISTORY": "7d", "SETTLE_LOG_LEVEL": "warn", "SETTLE_SECURE_COOKIES": "true",
	"SETTLE_TRUSTED_PROXIES": "10.0.0.0/8,192.0.2.1", "SETTLE_METRICS_ADDR": "127.0.0.1:9091", "SETTLE_MAX_IN_FLIGHT": "500",
	"SETTLE_MAX_IN_FLIGHT_PER_TENANT": "100",
	"SETTLE_MAX_WRITE_BACKLOG":        "100ms", "SETTLE_METRICS_TOKEN": "SECRET-0123456789abcdef", "SETTLE_SHUTDOWN_TIMEOUT": "6m",
	"SETTLE_WORKER_ID": "replica-a", "STRIPE_API_KEY": "sk_test_SECRET", "STRIPE_API_BASE": "https://proxy:SECRET@stripe.example.com/SECRET",
	"STRIPE_WEBHOOK_SECRET": "whsec_SECRET", "STRIPE_CONNECT_WEBHOOK_SECRET": "whsec_connect_SECRET",
	"SETTLE_STRIPE_TENANT_KEY": "shop_tenant", "SETTLE_STRIPE_TENANT_CHECK": "off", "SETTLE_STRIPE_TIMEOUT": "5s",
	"SETTLE_STRIPE_READS_PER_SECOND": "10", "SETTLE_STRIPE_TENANT_READS_PER_SECOND": "2.5", "SETTLE_REFUND_DEADLINE": "20s",
	"SETTLE_RECONCILE_INTERVAL": "off", "SETTLE_OUTBOX_URL": "https://hooks.example.com/SECRET?token=SECRET",
	"SETTLE_OUTBOX_KEEP": "72h", "SETTLE_NOTIFY_WEBHOOK_URL": "https://hooks.slack.example.com/services/SECRET",
	"SETTLE_SMTP_URL":            "smtp://settle:SECRET@mail.example.com:587?from=settle@example.com",
	"SETTLE_ROLLUP_MINUTES_KEEP": "72h", "SETTLE_RETENTION": "35d", "SETTLE_ROLE_LEASE": "10s", "SETTLE_OPERATION_LEASE": "20s",
	"SETTLE_LLM_BASE_URL": "https://llm.example.com/SECRET/v1", "SETTLE_LLM_API_KEY": "sk-SECRET",
	"SETTLE_ANTHROPIC_BASE_URL": "https://anthropic.example.com/SECRET", "SETTLE_ANTHROPIC_API_KEY": "sk-ant-SECRET",
	"SETTLE_ANTHROPIC_ADMIN_KEY": "sk-ant-admin-SECRET", "SETTLE_ANTHROPIC_API_KEY_ID": "apikey_01settle",
	"SETTLE_LLM_PROVIDER_NAME": "acme-llm", "SETTLE_LLM_POLICY": "batch", "SETTLE_LLM_TENANT_POLICIES": "shop=interactive",
	"SETTLE_LLM_PRICES": "prices.json", "SETTLE_LLM_KEY_TTL": "48h", "SETTLE_LLM_BODY_KEEP": "24h", "SETTLE_LLM_STORE": "on",
	"SETTLE_LLM_KEY_SCOPE": "tenant,acme=user", "SETTLE_LLM_ATTEMPT_TIMEOUT": "1m", "SETTLE_LLM_DEADLINE": "5m",
	"SETTLE_LLM_MAX_WAIT": "30s", "SETTLE_WORKERS": "4", "SETTLE_JOB_WEBHOOK_URL": "https://jobs.example.com/SECRET",
	"SETTLE_JOB_LEASE": "20s", "SETTLE_JOB_RETRY_UNCERTAIN": "true", "SETTLE_JOB_MAX_ATTEMPTS": "5", "SETTLE_JOB_DEADLINE": "2h",
	"SETTLE_JOB_MAX_COST_MICROS": "1000", "SETTLE_WORKER_METRICS_ADDR": "127.0.0.1:9092", "SETTLE_ALERT_RULES": filepath.Join("..", "..", "alerts", "default_rules.yaml"),
	"SETTLE_ALERTMANAGER_URL":   "https://am:SECRET@alertmanager.example.com",
	"SETTLE_ALERT_WEBHOOK_URLS": "https://a.example.com/SECRET,https://b.example.com/SECRET",
	"SETTLE_EXTERNAL_URL":       "https://settle.example.com/SECRET", "SETTLE_OIDC_ISSUER": "https://idp.example.com/SECRET",
	"SETTLE_OIDC_CLIENT_ID": "settle", "SETTLE_OIDC_CLIENT_SECRET": "SECRET",
	"SETTLE_OIDC_REDIRECT_URL": "https://settle.example.com/login/oidc/callback", "SETTLE_OIDC_ROLE_CLAIM": "roles",
	"SETTLE_OIDC_ROLES": "settle-admins=admin", "SETTLE_OIDC_PROVIDER_NAME": "Example IdP",
	"SETTLE_OIDC_TRUSTED_EMAIL_CLAIM": "preferred_username", "SETTLE_PASSWORD_LOGIN": "off",
	"SETTLE_APPROVAL_MIN_CENTS": "10000", "SETTLE_APPROVAL_NOT_EXECUTED": "on", "SETTLE_APPROVAL_TTL": "2h",
	"SETTLE_MCP_TOKEN": "stl_SECRET", "GOGC": "100", "GOMEMLIMIT": "200MiB",
}

// readByTheTable are the settings the table says this package reads: those with a variable
// and no other package reading it.
func readByTheTable() []*setting {
	var out []*setting
	for _, s := range table() {
		if s.Name != "" && s.ReadIn == "" {
			out = append(out, s)
		}
	}
	return out
}

// expand is the commands a setting names, its groups replaced by their commands.
func expand(cmds []string) []string {
	var out []string
	for _, c := range cmds {
		if g, ok := commandGroups[c]; ok {
			out = append(out, g...)
		} else {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readsOf runs LoadConfig for args with vars and returns the variables it asked for.
func readsOf(t *testing.T, args []string, vars map[string]string) map[string]bool {
	t.Helper()
	asked := map[string]bool{}
	getenv := func(k string) string { asked[k] = true; return vars[k] }
	if _, err := LoadConfig(args, getenv, t.TempDir()); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return asked
}

// TestEverySettingIsReadByTheCommandsTheTableNames runs every command with no variable set
// and with every one set, records what each asks the environment for, and wants each entry
// of the table read by exactly the commands it names: a setting nothing reads, or one read
// by a command its entry leaves out, fails here. GOGC is read once per process, before the
// command.
func TestEverySettingIsReadByTheCommandsTheTableNames(t *testing.T) {
	t.Parallel()
	for _, c := range commandsOfCommandFlags(t) {
		if !slices.Contains(commandGroups["every command"], c) {
			t.Errorf("commandFlags defines %q, which the group \"every command\" of settings.go leaves out", c)
		}
	}
	for _, c := range commandGroups["every command"] {
		if commandArgs[c] == nil {
			t.Fatalf("the test has no command line for %q: add one to commandArgs", c)
		}
	}
	readers := map[string][]string{}
	for cmd, args := range commandArgs {
		asked := readsOf(t, args, map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:1/x", "SETTLE_MCP_TOKEN": "t"})
		for k := range readsOf(t, args, validEnv) {
			asked[k] = true
		}
		tuneGC(func(k string) string { asked[k] = true; return validEnv[k] })
		for k := range asked {
			readers[k] = append(readers[k], cmd)
		}
	}
	for _, s := range readByTheTable() {
		got := readers[s.Name]
		slices.Sort(got)
		if want := expand(s.Commands); !slices.Equal(got, want) {
			t.Errorf("%s is read by %v; its entry says %v", s.Name, got, want)
		}
	}
}

// commandsOfCommandFlags are the commands commandFlags defines: the strings of the cases of
// its switch.
func commandsOfCommandFlags(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "commandFlags" {
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if cc, ok := n.(*ast.CaseClause); ok {
					for _, e := range cc.List {
						if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
							c, _ := strconv.Unquote(lit.Value)
							cmds = append(cmds, c)
						}
					}
				}
				return true
			})
		}
	}
	if len(cmds) == 0 {
		t.Fatal("found no command in commandFlags of config.go")
	}
	return cmds
}

// TestValidEnvCoversTheTable keeps the other tests' sample environment whole: a new setting
// needs a valid value there, so the tests above and the secrets test exercise it.
func TestValidEnvCoversTheTable(t *testing.T) {
	t.Parallel()
	for _, s := range readByTheTable() {
		if _, ok := validEnv[s.Name]; !ok {
			t.Errorf("validEnv has no value of %s", s.Name)
		}
		if s.Short == "" || s.Doc == "" || s.Parses == "" || len(s.Commands) == 0 {
			t.Errorf("%s: the entry needs a line for 'settle help', a doc, what it parses and its commands", s.Name)
		}
	}
	for name := range validEnv {
		if !slices.ContainsFunc(settings, func(s *setting) bool { return s.Name == name }) {
			t.Errorf("validEnv sets %s, which the table does not hold", name)
		}
	}
}

// TestFlagsOfTheTableExist wants every flag the table names defined on the commands the
// entry names, or on the one its flag names ("serve --migrate").
func TestFlagsOfTheTableExist(t *testing.T) {
	t.Parallel()
	for _, s := range table() {
		if s.Flag == "" {
			continue
		}
		words := strings.Fields(s.Flag)
		flagName := strings.TrimPrefix(words[len(words)-1], "--")
		cmds := expand(s.Commands)
		if len(words) > 1 {
			cmds = []string{strings.Join(words[:len(words)-1], " ")}
		}
		for _, c := range cmds {
			cfg := Config{Command: c}
			var role string
			fs, _, _, err := commandFlags(&cfg, &role, environ(env(validEnv)), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if fs.Lookup(flagName) == nil {
				t.Errorf("%s: %s has no flag --%s", s.Flag, c, flagName)
			}
		}
	}
}

// TestDocumentedDefaultsAreTheCodes sets each variable whose documented default is one
// value to that value, and wants the configuration it gives equal to the one with the
// variable unset: the table's default is the one the code applies.
func TestDocumentedDefaultsAreTheCodes(t *testing.T) {
	t.Parallel()
	appliedLater := map[string]string{
		"STRIPE_API_BASE":          "the Stripe adapter applies it to an empty base",
		"SETTLE_STRIPE_TENANT_KEY": "the refund tool applies it to an empty key",
		"SETTLE_LLM_PROVIDER_NAME": "the gateway's wiring applies it to an empty name",
		"GOGC":                     "tuneGC applies it (TestTuneGCLeavesAnOperatorsChoice)",
		"GOMEMLIMIT":               "tuneGC applies it (TestTuneGCSetsASoftMemoryLimit)",
	}
	single := regexp.MustCompile("^`([^`]+)`$")
	base := map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1:1/x", "SETTLE_MCP_TOKEN": "t"}
	sso := map[string]string{"SETTLE_OIDC_ISSUER": "https://idp.example.com", "SETTLE_OIDC_CLIENT_ID": "settle",
		"SETTLE_OIDC_ROLES": "settle-admins=admin", "SETTLE_OIDC_REDIRECT_URL": "https://settle.example.com/login/oidc/callback"}
	for _, s := range readByTheTable() {
		m := single.FindStringSubmatch(s.Default)
		if m == nil || appliedLater[s.Name] != "" {
			continue
		}
		unset := map[string]string{}
		for k, v := range base {
			unset[k] = v
		}
		if strings.HasPrefix(s.Name, "SETTLE_OIDC_") || s.Name == "SETTLE_PASSWORD_LOGIN" {
			for k, v := range sso {
				unset[k] = v
			}
		}
		set := map[string]string{s.Name: m[1]}
		for k, v := range unset {
			set[k] = v
		}
		args := commandArgs[expand(s.Commands)[0]]
		a, errA := LoadConfig(args, env(unset), t.TempDir())
		b, errB := LoadConfig(args, env(set), t.TempDir())
		if errA != nil || errB != nil {
			t.Errorf("%s: unset: %v; set to its default %s: %v", s.Name, errA, m[1], errB)
			continue
		}
		a.DemoDir, b.DemoDir = "", "" // each run has its own working folder
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s=%s gives another configuration than %s unset: the documented default is not the code's", s.Name, m[1], s.Name)
		}
	}
}

// TestHelpListsEveryVariable wants 'settle help' to name every variable a settle command
// reads, those that were missing from it once included.
func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	code, stdout, _ := run(t, []string{"help"}, nil, "")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	env := stdout[strings.Index(stdout, "\nEnvironment"):]
	listed := map[string]bool{}
	for line := range strings.Lines(env) {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") {
			listed[f[0]] = true
		}
	}
	for _, s := range table() {
		if s.Name != "" && readBySettle(s) && !listed[s.Name] {
			t.Errorf("settle help does not list %s", s.Name)
		}
	}
	for _, name := range []string{"SETTLE_METRICS_ADDR", "SETTLE_METRICS_TOKEN", "SETTLE_SMTP_URL", "SETTLE_NOTIFY_WEBHOOK_URL",
		"SETTLE_DB_POOLER", "SETTLE_JOB_LEASE", "SETTLE_JOB_MAX_ATTEMPTS", "SETTLE_JOB_DEADLINE", "SETTLE_JOB_MAX_COST_MICROS",
		"SETTLE_TRUSTED_PROXIES", "SETTLE_DEMO_HISTORY", "SETTLE_LLM_PROVIDER_NAME", "SETTLE_LLM_ATTEMPT_TIMEOUT",
		"SETTLE_LLM_DEADLINE", "SETTLE_LLM_MAX_WAIT", "GOGC"} {
		if !listed[name] {
			t.Errorf("settle help does not list %s", name)
		}
	}
	for line := range strings.Lines(env) {
		if len(strings.TrimRight(line, "\n")) > helpWidth && strings.Contains(strings.TrimSpace(line), " ") {
			t.Errorf("help line longer than %d characters: %q", helpWidth, line)
		}
	}
}

// The markers around the generated table of docs/configuration.md.
const (
	docsBegin = "<!-- settings table: generated from cmd/settle/settings_*.go; `SETTLE_UPDATE_DOCS=1 go test -run TestConfigurationDocMatchesTheTable ./cmd/settle/` rewrites it -->\n"
	docsEnd   = "<!-- end of the generated settings table -->\n"
)

// TestConfigurationDocMatchesTheTable wants the settings table of docs/configuration.md to be
// the one the table generates; with SETTLE_UPDATE_DOCS=1 it writes it there instead.
func TestConfigurationDocMatchesTheTable(t *testing.T) {
	path := filepath.Join(moduleRoot(t), "docs", "configuration.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(docsBegin)), bytes.Index(doc, []byte(docsEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no generated settings table between the markers %q and %q", path, docsBegin, docsEnd)
	}
	want := docsTable()
	if got := string(doc[i+len(docsBegin) : j]); got != want {
		if os.Getenv("SETTLE_UPDATE_DOCS") == "1" {
			out := slices.Concat(doc[:i+len(docsBegin)], []byte(want), doc[j:])
			if err := os.WriteFile(path, out, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote the settings table of %s", path)
			return
		}
		t.Errorf("the settings table of %s is not the one cmd/settle/settings_*.go generates; run SETTLE_UPDATE_DOCS=1 go test -run TestConfigurationDocMatchesTheTable ./cmd/settle/", path)
	}
}

// readOutsideTheTable are variables other packages name for good reasons: test knobs and
// test helpers, none of them a setting of settle. Each is allowed in its folder only.
var readOutsideTheTable = map[string]map[string]string{
	"internal/testtool": {
		"SETTLE_TEST_STRICT": "a test knob: CI sets it so a test whose program is missing fails instead of skipping",
	},
	"ops/jobs/internal/jobworker": {
		"DATABASE_URL":               "the crash tests' worker process, started only by the tests of ops/jobs",
		"SETTLE_LLM_BASE_URL":        "the crash tests' worker process, started only by the tests of ops/jobs",
		"SETTLE_LLM_API_KEY":         "the crash tests' worker process, started only by the tests of ops/jobs",
		"SETTLE_JOB_WEBHOOK_URL":     "the crash tests' worker process, started only by the tests of ops/jobs",
		"SETTLE_WORKERS":             "the crash tests' worker process, started only by the tests of ops/jobs",
		"SETTLE_JOB_LEASE":           "the crash tests' worker process, started only by the tests of ops/jobs",
		"SETTLE_JOB_RETRY_UNCERTAIN": "the crash tests' worker process, started only by the tests of ops/jobs",
	},
}

// variableName is what a string literal naming a variable of Settle looks like.
var variableName = regexp.MustCompile(`^((SETTLE|STRIPE)_[A-Z0-9_]+|DATABASE_URL)$`)

// TestNoVariableIsReadOutsideTheTable scans every non-test Go file of the module for string
// literals naming a variable of Settle: only the table's files may hold one, besides the
// package an entry says reads it (ReadIn) and the test knobs listed in readOutsideTheTable.
// Every entry read elsewhere must still be named there, and every allowance still be used.
func TestNoVariableIsReadOutsideTheTable(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	found := map[string]map[string]bool{} // folder → names
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipFolder(path, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		dir := filepath.ToSlash(filepath.Dir(rel))
		for name, pos := range variableLiterals(t, path) {
			if dir == "cmd/settle" && strings.HasPrefix(filepath.Base(rel), "settings") {
				continue
			}
			if found[dir] == nil {
				found[dir] = map[string]bool{}
			}
			found[dir][name] = true
			if readOutsideTheTable[dir][name] != "" || slices.ContainsFunc(settings, func(s *setting) bool { return s.Name == name && s.ReadIn == dir }) {
				continue
			}
			t.Errorf("%s:%d names %s outside the table of settings: read it through an entry of cmd/settle/settings_*.go "+
				"(or, for a test knob, list it in readOutsideTheTable with the reason)", rel, pos, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		if s.ReadIn != "" && !found[s.ReadIn][s.Name] {
			t.Errorf("%s: its entry says %s reads it, and nothing there names it", s.Name, s.ReadIn)
		}
	}
	for dir, names := range readOutsideTheTable {
		for name := range names {
			if !found[dir][name] {
				t.Errorf("readOutsideTheTable allows %s in %s, which no longer names it", name, dir)
			}
		}
	}
}

// variableLiterals are the string literals of the Go file at path that name a variable, with
// the line of one of each.
func variableLiterals(t *testing.T, path string) map[string]int {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		if s, err := strconv.Unquote(lit.Value); err == nil && variableName.MatchString(s) {
			out[s] = fset.Position(lit.Pos()).Line
		}
		return true
	})
	return out
}

// skipFolder says whether a folder holds none of this module's Go code: hidden folders,
// testdata, vendor, node_modules and nested modules.
func skipFolder(path, name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "node_modules" {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// moduleRoot is the folder of the module's go.mod, above the package's folder.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
			continue
		}
		t.Fatal("no go.mod above " + dir)
	}
}

// TestTablePanicsOnASettingItDoesNotHold is the guard of the table's one door: a reader that
// makes up a setting of its own is stopped at its first read.
func TestTablePanicsOnASettingItDoesNotHold(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("reading a setting the table does not hold did not panic")
		}
	}()
	environ(func(string) string { return "" }).get(&setting{Name: "MADE_UP"})
}
