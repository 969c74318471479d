package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/outbox"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/recon"
)

// Config is everything a settle command reads from its flags and the environment, read in
// one place and validated before anything starts.
type Config struct {
	// Command is the subcommand: serve, migrate, demo, "user add", "token add"...
	Command string

	DatabaseURL string
	DBPooler    string // SETTLE_DB_POOLER: auto or transaction
	Addr        string
	// Migrate lets serve bring an old schema up to date instead of refusing to start.
	Migrate bool
	// SecureCookies marks the session cookie HTTPS-only; turn it on behind TLS.
	SecureCookies bool
	LogLevel      slog.Level

	// DemoDir holds the demo's private Postgres cluster.
	DemoDir string
	// DemoHistory is the days of history of demo's --history (SETTLE_DEMO_HISTORY), e.g. 30d.
	DemoHistory string

	// Email and Role are the new user of "user add".
	Email string
	Role  desk.Role
	// Tenant and TokenName are the tenant and the label of "token add".
	Tenant    string
	TokenName string
	TokenID   int64 // the token "token revoke" revokes
	// StripeAccount is what "tenant stripe-account" binds Tenant to; ClearStripeAccount unbinds.
	StripeAccount      string
	ClearStripeAccount bool
	TenantApprovals    ops.TenantApprovals // what "tenant approvals" sets for Tenant
	// KeepApprovals are the settings "tenant approvals" was given no flag for (they stay as
	// the tenant has them); LLMBudgetMicros is what "tenant budget" sets, 0 to clear it.
	KeepApprovals   pg.KeepApprovals
	LLMBudgetMicros int64

	Stripe StripeConfig
	// OutboxURL receives the outbox's events as JSON POSTs; empty keeps them in the table.
	OutboxURL string
	// OutboxKeep is how long a delivered event stays in the outbox.
	OutboxKeep time.Duration
	// RollupMinuteKeep is how long minute rollups and minute backlog snapshots are kept.
	RollupMinuteKeep time.Duration
	// Alerts is how alerts are evaluated and delivered.
	Alerts AlertsConfig
	// Notify is where follow-ups' notifications go (SETTLE_NOTIFY_WEBHOOK_URL, SETTLE_SMTP_URL).
	Notify NotifyConfig
	// Jobs holds the pipeline jobs' settings of serve, demo and worker.
	Jobs JobsConfig
	// WorkerID names this process in leases and audit rows.
	WorkerID string
	// RoleLease is how long the lease of a background role that runs on one replica at a
	// time lasts unless its holder renews it (SETTLE_ROLE_LEASE).
	RoleLease time.Duration
	// OperationLease is how long a replica owns an operation it sends before another may
	// take it over (SETTLE_OPERATION_LEASE; default 30 s).
	OperationLease time.Duration
	// ShutdownTimeout is how long serve and demo wait after SIGTERM for requests in flight
	// and the background services' work in hand (SETTLE_SHUTDOWN_TIMEOUT; default the
	// longest call in flight, a refund or an LLM call, plus 10 s, so it is answered and
	// recorded).
	ShutdownTimeout time.Duration
	// Web is what the HTTP listener of serve and demo needs to know about its clients.
	Web WebConfig

	// Fake holds the flags of "fake stripe".
	Fake FakeConfig

	// Reconcile holds the flags of "reconcile" and the background interval of serve and demo.
	Reconcile ReconcileConfig
	// Retention is SETTLE_RETENTION and the flags of "retention run".
	Retention RetentionConfig

	LLM LLMConfig
	// FakeLLM holds the flags of "fake llm".
	FakeLLM FakeLLMConfig
	// FakeAnthropic holds the flags of "fake anthropic".
	FakeAnthropic FakeLLMConfig

	// MCPStdio selects the stdio transport of "mcp"; MCPToken is the API token it acts
	// with (SETTLE_MCP_TOKEN), which decides the tenant.
	MCPStdio bool
	MCPToken string
}

// LLMConfig is how the gateway reaches the LLM providers.
type LLMConfig struct {
	BaseURL, APIKey, ProviderName string
	// AnthropicBaseURL and AnthropicAPIKey reach Anthropic's Messages API; AnthropicAdminKey
	// reads its usage report for the reconciler, of the key AnthropicAPIKeyID when it is set
	// (loadAnthropic).
	AnthropicBaseURL, AnthropicAPIKey, AnthropicAdminKey, AnthropicAPIKeyID string
	// Prices is the path of a JSON price table; empty uses the built-in one.
	Prices string
	// Policy is interactive or batch; TenantPolicies overrides it per tenant.
	Policy         string
	TenantPolicies map[string]string
	// KeyScope is tenant or user; TenantKeyScopes overrides it per tenant.
	KeyScope        string
	TenantKeyScopes map[string]string
	// Store is auto, on or off: whether calls ask the provider to store their completions,
	// so unknown outcomes can be looked up (SETTLE_LLM_STORE).
	Store          string
	KeyTTL         time.Duration
	AttemptTimeout time.Duration
	Deadline       time.Duration
	MaxWait        time.Duration
	// BodyKeep is how long prompts and completions outlive the key's TTL before the purge
	// deletes them (SETTLE_LLM_BODY_KEEP).
	BodyKeep time.Duration
}

// FakeLLMConfig is what "fake llm" or "fake anthropic" serves.
type FakeLLMConfig struct {
	Addr       string
	Faults     string
	Latency    time.Duration
	ChunkDelay time.Duration
	Seed       int64
}

// FakeConfig is what "fake stripe" serves.
type FakeConfig struct {
	Addr          string
	Faults        string
	WebhookURL    string
	WebhookSecret string
	Retention     time.Duration
}

// usageError is a mistake on the command line; it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

const defaultAddr = "127.0.0.1:8080"

// LoadConfig reads args (without the program name) and the environment through getenv, which
// it asks only for the settings of the table (settings.go). Flags win over the environment,
// which wins over defaults.
func LoadConfig(args []string, getenv func(string) string, workDir string) (Config, error) {
	cfg, args, err := readCommand(args)
	if err != nil {
		return cfg, err
	}
	e := environ(getenv)
	var role string
	fs, needDB, needAddr, err := commandFlags(&cfg, &role, e, workDir)
	if err != nil {
		return cfg, err
	}
	if err := parseOnce(fs, args); err != nil {
		return cfg, err
	}
	cfg.Role = desk.Role(role)
	if fs.NArg() > 0 {
		return cfg, usagef("%s: unexpected argument %q", cfg.Command, fs.Arg(0))
	}

	if err := loadCommonEnv(&cfg, e, needDB); err != nil {
		return cfg, err
	}
	if needAddr {
		if err := checkListenAddr(cfg.Command, cfg.Addr); err != nil {
			return cfg, err
		}
	}
	if err := checkCommandFlags(&cfg, e); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// readCommand reads the command from the front of args, two words for the commands that
// have subcommands ("fake stripe", "token add"), and returns the arguments after it.
func readCommand(args []string) (Config, []string, error) {
	if len(args) == 0 {
		return Config{}, args, usagef("no command given; run 'settle help'")
	}
	cfg := Config{Command: args[0]}
	args = args[1:]
	if subs, ok := twoWordCommands[cfg.Command]; ok {
		if len(args) == 0 || !slices.Contains(subs, args[0]) {
			return cfg, args, usagef("unknown command %q; did you mean %s?", strings.Join(append([]string{cfg.Command}, args...), " "), didYouMean(cfg.Command, subs))
		}
		cfg.Command += " " + args[0]
		args = args[1:]
	}
	if cfg.Command == "tenant" {
		return readTenantCommand(cfg, args)
	}
	if cfg.Command == "user" || cfg.Command == "token" {
		sub := map[string]bool{"add": true, "list": cfg.Command == "token", "revoke": cfg.Command == "token"}
		if len(args) == 0 || !sub[args[0]] {
			return cfg, args, usagef("unknown command %q; did you mean '%s add'?", strings.Join(append([]string{cfg.Command}, args...), " "), cfg.Command)
		}
		cfg.Command += " " + args[0]
		args = args[1:]
	}
	return cfg, args, nil
}

// commandFlags defines the flags of cfg's command, writing into cfg (and role, for 'user
// add'), and says whether the command needs a database and a listen address.
func commandFlags(cfg *Config, role *string, e environ, workDir string) (fs *flag.FlagSet, needDB, needAddr bool, err error) {
	fs = flag.NewFlagSet(cfg.Command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	needDB, needAddr = true, false
	switch cfg.Command {
	case "serve":
		needAddr = true
		fs.StringVar(&cfg.Addr, "addr", e.or(envAddr, defaultAddr), "listen address (env SETTLE_ADDR)")
		fs.BoolVar(&cfg.Migrate, "migrate", false, "apply pending migrations before serving")
		fs.BoolVar(&cfg.SecureCookies, "secure-cookies", false, "send the session cookie over HTTPS only")
	case "demo":
		needDB, needAddr = false, true
		fs.StringVar(&cfg.Addr, "addr", e.or(envAddr, defaultAddr), "listen address (env SETTLE_ADDR)")
		fs.StringVar(&cfg.DemoDir, "dir", filepath.Join(workDir, ".settle", "demo-pg"), "folder of the demo's Postgres cluster")
		fs.StringVar(&cfg.DemoHistory, "history", e.or(envDemoHistory, "30d"), "days of history for a new demo database: 30d, 7d, 0d")
	case "migrate":
	case "worker":
	case "reconcile":
		addReconcileFlags(fs, &cfg.Reconcile)
	case "retention run":
		fs.BoolVar(&cfg.Retention.DryRun, "dry-run", false, "count what a pass would remove, and remove nothing")
	case "mcp":
		fs.BoolVar(&cfg.MCPStdio, "stdio", false, "serve the refund tools to one agent on stdin and stdout")
	case "fake stripe":
		needDB = false
		fs.StringVar(&cfg.Fake.Addr, "addr", "127.0.0.1:12111", "listen address (loopback only)")
		fs.StringVar(&cfg.Fake.Faults, "faults", "", "fault rules, e.g. 'POST /v1/refunds timeout_after_commit p=0.1 delay=3s'")
		fs.StringVar(&cfg.Fake.WebhookURL, "webhook-url", "", "where to send signed events")
		fs.StringVar(&cfg.Fake.WebhookSecret, "webhook-secret", "whsec_fake", "secret that signs the events")
		fs.DurationVar(&cfg.Fake.Retention, "retention", 24*time.Hour, "how long idempotency keys are kept")
	case "alerts export":
		needDB = false
		alertsExportFlags(fs, &cfg.Alerts)
	case "fake llm":
		needDB = false
		fs.StringVar(&cfg.FakeLLM.Addr, "addr", "127.0.0.1:12112", "listen address (loopback only)")
		fs.StringVar(&cfg.FakeLLM.Faults, "faults", "", "fault rules, e.g. 'bill_then_timeout p=0.1 delay=5s; drop_stream chunk=3 p=0.05'")
		fs.DurationVar(&cfg.FakeLLM.Latency, "latency", 50*time.Millisecond, "wait before the first byte")
		fs.DurationVar(&cfg.FakeLLM.ChunkDelay, "chunk-delay", 20*time.Millisecond, "pause between streamed chunks")
		fs.Int64Var(&cfg.FakeLLM.Seed, "seed", 1, "seed of the fault probabilities")
	case "fake anthropic":
		needDB = false
		fs.StringVar(&cfg.FakeAnthropic.Addr, "addr", "127.0.0.1:12113", "listen address (loopback only)")
		fs.StringVar(&cfg.FakeAnthropic.Faults, "faults", "", "fault rules, e.g. 'overloaded p=0.1; drop_stream chunk=3 p=0.05'")
		fs.DurationVar(&cfg.FakeAnthropic.Latency, "latency", 50*time.Millisecond, "wait before the first byte")
		fs.DurationVar(&cfg.FakeAnthropic.ChunkDelay, "chunk-delay", 20*time.Millisecond, "pause between streamed deltas")
		fs.Int64Var(&cfg.FakeAnthropic.Seed, "seed", 1, "seed of the fault probabilities")
	case "user add":
		fs.StringVar(&cfg.Email, "email", "", "the user's email")
		fs.StringVar(role, "role", "", "support, oncall, manager or admin")
	case "token add":
		fs.StringVar(&cfg.Tenant, "tenant", "", "tenant name; created if missing")
		fs.StringVar(&cfg.TokenName, "name", "cli", "a label for the token")
	case "token list", "tenant approvals": // the latter's flags are read by readTenantCommand, as 'tenant budget''s
	case "tenant list", "tenant budget": // budgets count in the currency of the servers' price table (tenantCurrency)
		cfg.LLM.Prices = e.get(envLLMPrices)
	case "tenant stripe-account":
		fs.BoolVar(&cfg.ClearStripeAccount, "clear", false, "unbind the tenant from its Stripe account")
	case "token revoke":
		fs.Int64Var(&cfg.TokenID, "id", 0, "the token's id, as 'token list' shows it")
	default:
		return nil, false, false, usagef("unknown command %q; run 'settle help'", cfg.Command)
	}
	return fs, needDB, needAddr, nil
}

// loadCommonEnv reads the environment the commands share: the log level, the database URL
// when the command needs one, and the settings of the commands that serve or send alerts.
func loadCommonEnv(cfg *Config, e environ, needDB bool) error {
	if err := cfg.LogLevel.UnmarshalText([]byte(e.or(envLogLevel, "info"))); err != nil {
		return usagef("%s=%q is not a level; use debug, info, warn or error", envLogLevel.Name, e.get(envLogLevel))
	}
	if needDB {
		cfg.DatabaseURL = e.get(envDatabaseURL)
		if cfg.DatabaseURL == "" {
			return usagef("%s is not set; set it to postgres://user@host:port/db, or run 'settle demo' for a private database", envDatabaseURL.Name)
		}
		// The URL may hold a password, so the message never repeats it.
		if _, err := pgx.ParseConfig(cfg.DatabaseURL); err != nil {
			return usagef("%s is malformed; expected postgres://user@host:port/db", envDatabaseURL.Name)
		}
		pooler, err := readPooler(e.get(envDBPooler))
		if err != nil {
			return err
		}
		cfg.DBPooler = pooler
	}
	if slices.Contains(commandGroups["server commands"], cfg.Command) {
		if err := loadServeEnv(cfg, e); err != nil {
			return err
		}
	}
	if cfg.Command == "tenant budget" || cfg.Command == "tenant list" {
		// Budgets are counted in the currency of the servers' price table: these commands
		// read the table to name it (tenantCurrency).
		cfg.LLM.Prices = e.get(envLLMPrices)
	}
	if cfg.Command == "serve" || cfg.Command == "demo" || cfg.Command == "alerts export" {
		if err := loadAlertsEnv(&cfg.Alerts, e); err != nil {
			return err
		}
	}
	if cfg.Command == "serve" || cfg.Command == "demo" {
		if v := e.get(envSecureCookies); v != "" && !cfg.SecureCookies {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return usagef("%s=%q is not true or false", envSecureCookies.Name, v)
			}
			cfg.SecureCookies = b
		}
		if err := loadWebEnv(&cfg.Web, cfg.Addr, e); err != nil {
			return err
		}
	}
	return nil
}

// checkCommandFlags refuses a command whose required flags or variables are missing.
func checkCommandFlags(cfg *Config, e environ) error {
	switch cfg.Command {
	case "user add":
		if cfg.Email == "" {
			return usagef("user add: --email is required")
		}
		if !cfg.Role.Valid() {
			return usagef("user add: --role must be one of support, oncall, manager, admin")
		}
	case "token add":
		if cfg.Tenant == "" {
			return usagef("token add: --tenant is required")
		}
	case "retention run":
		return checkRetentionRun(*cfg, e)
	case "token revoke":
		if cfg.TokenID <= 0 {
			return usagef("token revoke: --id is required: the token's id, as 'settle token list' shows it")
		}
	case "mcp":
		if !cfg.MCPStdio {
			return usagef("mcp: pass --stdio; agents connecting over HTTP use /mcp of 'settle serve'")
		}
		// Trimmed as /mcp trims a bearer token: a pasted token often ends in a newline.
		if cfg.MCPToken = strings.TrimSpace(e.get(envMCPToken)); cfg.MCPToken == "" {
			return usagef("mcp --stdio: set %s to an API token made with 'settle token add'", envMCPToken.Name)
		}
	}
	return nil
}

// loadServeEnv reads what serve and demo share: Stripe, the outbox and the worker name.
func loadServeEnv(cfg *Config, e environ) error {
	if err := loadStripeEnv(&cfg.Stripe, e); err != nil {
		return err
	}
	var err error
	cfg.OutboxURL = e.get(envOutboxURL)
	if err := checkHTTPURL(envOutboxURL, cfg.OutboxURL); err != nil {
		return err
	}
	if cfg.OutboxKeep, err = e.duration(envOutboxKeep, outbox.DefaultKeep); err != nil {
		return err
	}
	if cfg.RollupMinuteKeep, err = e.duration(envRollupMinutesKeep, recon.DefaultRollupMinuteKeep); err != nil {
		return err
	}
	if cfg.RollupMinuteKeep < recon.MinRollupMinuteKeep {
		return usagef("%s=%s is shorter than %s: the insights page reads the last day's minutes", envRollupMinutesKeep.Name, cfg.RollupMinuteKeep, recon.MinRollupMinuteKeep)
	}
	if v := e.get(envReconcileInterval); v != "off" {
		if cfg.Reconcile.Interval, err = e.duration(envReconcileInterval, 5*time.Minute); err != nil {
			return err
		}
	}
	if err := loadLLMEnv(cfg, e); err != nil {
		return err
	}
	// After the LLM settings: the wait covers the longest call the gateway may have in flight.
	if cfg.ShutdownTimeout, err = shutdownTimeoutEnv(e, cfg.Stripe.Deadline, cfg.LLM); err != nil {
		return err
	}
	if cfg.Jobs, err = loadJobsEnv(e); err != nil {
		return err
	}
	if err := loadRolesEnv(cfg, e); err != nil {
		return err
	}
	if cfg.OperationLease, err = operationLeaseEnv(e); err != nil {
		return err
	}
	cfg.WorkerID = workerID(e)
	if err := loadWorkerEnv(cfg, e); err != nil {
		return err
	}
	return loadNotifyEnv(&cfg.Notify, e)
}

// loadLLMEnv reads the gateway's settings; without SETTLE_LLM_BASE_URL or
// SETTLE_ANTHROPIC_BASE_URL the gateway is off.
func loadLLMEnv(cfg *Config, e environ) error {
	l := &cfg.LLM
	l.BaseURL, l.APIKey, l.ProviderName = e.get(envLLMBaseURL), e.get(envLLMAPIKey), e.get(envLLMProviderName)
	l.Prices = e.get(envLLMPrices)
	if err := checkHTTPURL(envLLMBaseURL, l.BaseURL); err != nil {
		return err
	}
	if err := l.loadAnthropic(e); err != nil {
		return err
	}
	l.Policy = e.or(envLLMPolicy, "interactive")
	if l.Policy != "interactive" && l.Policy != "batch" {
		return usagef("%s=%q: use interactive or batch", envLLMPolicy.Name, l.Policy)
	}
	if v := e.get(envLLMTenantPolicies); v != "" {
		l.TenantPolicies = map[string]string{}
		for _, pair := range strings.Split(v, ",") {
			name, pol, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok || name == "" || (pol != "interactive" && pol != "batch") {
				return usagef("%s: %q is not tenant=interactive or tenant=batch", envLLMTenantPolicies.Name, pair)
			}
			l.TenantPolicies[name] = pol
		}
	}
	if err := loadKeyScopes(l, e.get(envLLMKeyScope)); err != nil {
		return err
	}
	l.Store = e.or(envLLMStore, "auto")
	if l.Store != "auto" && l.Store != "on" && l.Store != "off" {
		return usagef("%s=%q: use auto, on or off", envLLMStore.Name, l.Store)
	}
	var err error
	if l.KeyTTL, err = e.duration(envLLMKeyTTL, 24*time.Hour); err != nil {
		return err
	}
	if l.BodyKeep, err = bodyKeepEnv(e); err != nil {
		return err
	}
	if l.AttemptTimeout, err = e.duration(envLLMAttemptTimeout, 10*time.Minute); err != nil {
		return err
	}
	if l.Deadline, err = e.duration(envLLMDeadline, 10*time.Minute); err != nil {
		return err
	}
	if l.MaxWait, err = e.duration(envLLMMaxWait, 60*time.Second); err != nil {
		return err
	}
	// The key must outlive every retry of the intent, or a late retry would run it again.
	if l.KeyTTL <= l.Deadline+time.Hour {
		return usagef("%s=%s must be longer than %s=%s plus an hour", envLLMKeyTTL.Name, l.KeyTTL, envLLMDeadline.Name, l.Deadline)
	}
	return nil
}
