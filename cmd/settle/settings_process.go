package main

// The settings of the process: its database, its listeners and its name, and the tools'.

var (
	envDatabaseURL = define(sectionProcess, setting{Name: "DATABASE_URL", Commands: []string{"database commands"},
		Required: "required", Parses: "a PostgreSQL connection string: `postgres://user:pass@host:port/db?…` or `key=value` pairs",
		Short: "the database: postgres://user@host:port/db ('settle demo' starts its own)",
		Doc:   "the PostgreSQL database; `demo` starts its own", Secret: true})
	envDBPooler = define(sectionProcess, setting{Name: "SETTLE_DB_POOLER", Commands: []string{"database commands"},
		Default: "`auto`", Parses: "`auto` or `transaction`",
		Short: "what stands between Settle and Postgres: auto probes once at start, transaction sends every statement unnamed for a pooler in transaction mode",
		Doc: "what stands between Settle and Postgres: `auto` probes once at start (a pooler announces a process id no server process has) and, " +
			"on a direct connection, prepares statements and runs the ledger's two statements of a lifecycle on generic plans through a pool of " +
			"their own (at most 4 more connections per process); `transaction` skips the probe and sends every statement unnamed, for a pooler " +
			"in transaction mode the probe might not recognise"})
	envAddr = define(sectionProcess, setting{Name: "SETTLE_ADDR", Flag: "--addr", Commands: []string{"serve", "demo"},
		Default: "`127.0.0.1:8080`", Parses: "`host:port`; a loopback host for `demo`",
		Short: "listen address of serve and demo (demo: loopback only)",
		Doc: "listen address of `serve` and `demo`; `demo`, whose logins are published, refuses any but a loopback address " +
			"(`TestDemoRefusesAnAddressBeyondLoopback` (`cmd/settle/settings_limits_test.go`))"})
	_ = define(sectionProcess, setting{Flag: "serve --migrate", Commands: []string{"serve"},
		Default: "off", Parses: "a flag",
		Doc: "apply pending migrations; without it `serve` refuses an old schema"})
	envDemoHistory = define(sectionProcess, setting{Name: "SETTLE_DEMO_HISTORY", Flag: "demo --history", Commands: []string{"demo"},
		Default: "`30d`", Parses: "days, `0d` to `35d`",
		Short: "days of history demo writes into a new demo database",
		Doc:   "days of history `demo` writes into a new demo database before it serves; `0d` writes none"})
	_ = define(sectionProcess, setting{Flag: "demo --dir", Commands: []string{"demo"},
		Default: "`.settle/demo-pg`", Parses: "a folder",
		Doc: "the demo's Postgres cluster, created on the first run and kept; a folder that holds other files is refused, before " +
			"anything starts (`TestDemoRefusesAFolderThatIsNotACluster` (`cmd/settle/demo_test.go`))"})
	envLogLevel = define(sectionProcess, setting{Name: "SETTLE_LOG_LEVEL", Commands: []string{"every command"},
		Default: "`info`", Parses: "`debug`, `info`, `warn` or `error`, in any case",
		Short: "debug, info, warn or error",
		Doc:   "the least important log line written to stderr"})
	envSecureCookies = define(sectionProcess, setting{Name: "SETTLE_SECURE_COOKIES", Flag: "serve --secure-cookies", Commands: []string{"serve", "demo"},
		Default: "`false`", Parses: "a boolean: `true`, `false`, `1`, `0`, `t`, `f`",
		Short: "true behind HTTPS: the session cookie goes over HTTPS only",
		Doc:   "session cookie over HTTPS only (turn on behind TLS)"})
	envTrustedProxies = define(sectionProcess, setting{Name: "SETTLE_TRUSTED_PROXIES", Commands: []string{"serve", "demo"},
		Parses: "comma-separated IP addresses or networks such as `10.0.0.0/8`",
		Short:  "reverse proxies whose X-Forwarded-For names the client sign-in throttling counts",
		Doc: "the reverse proxies in front of `serve`: sign-in throttling takes the client from the `X-Forwarded-For` they append, and " +
			"ignores the header from anyone else. Behind a proxy left out, every client shares its address"})
	envMetricsAddr = define(sectionProcess, setting{Name: "SETTLE_METRICS_ADDR", Commands: []string{"serve", "demo"},
		Parses: "`host:port`, not the main listen address",
		Short:  "serve /metrics on a listener of its own there, and not on the main one",
		Doc: "serve `/metrics` on a listener of its own at this `host:port` (e.g. `10.0.3.11:9090`), and not on `SETTLE_ADDR`; whoever " +
			"reaches it may scrape (with the token, when one is set), so keep it off public networks"})
	envMetricsToken = define(sectionProcess, setting{Name: "SETTLE_METRICS_TOKEN", Commands: []string{"serve", "demo", "worker"},
		Parses: "at least 16 characters, no spaces",
		Short:  "/metrics answers only Authorization: Bearer with it; without it or SETTLE_METRICS_ADDR, loopback clients only",
		Doc: "`/metrics` answers only `Authorization: Bearer` with it (401 otherwise), wherever it is served. Without it or " +
			"`SETTLE_METRICS_ADDR`, `/metrics` answers loopback clients only (403 otherwise)", Secret: true})
	envMaxInFlight = define(sectionProcess, setting{Name: "SETTLE_MAX_IN_FLIGHT", Commands: []string{"serve", "demo"},
		Default: "`1000`", Parses: "a whole number of requests, `0` or `off` for no cap",
		Short: "API requests answered at once; one more gets 503 with Retry-After: 1 before it is read",
		Doc: "how many API requests (`/api/v1`, the gateway's `/v1` and `/mcp`) `serve` and `demo` work on at once; one more is " +
			"refused at once with 503, code `overloaded` and `Retry-After: 1`, before its body is read or anything of it is " +
			"recorded, and counted in `settle_http_shed_total`. The probes, `/metrics` and the dashboard are never counted. Requests " +
			"in flight are their rate times their duration: 500 gateway calls a second at 50 ms each keep 25 in flight, and the " +
			"default leaves room for 40 times that (500 calls a second of 2 s each) while still bounding the backlog a starved " +
			"machine piles up, whose memory would push the heap to `GOMEMLIMIT` and the garbage collector to half the CPU. Raise " +
			"it, with `GOMEMLIMIT`, for long streams at high rates; `0` or `off`: no cap"})
	envMaxInFlightPerTenant = define(sectionProcess, setting{Name: "SETTLE_MAX_IN_FLIGHT_PER_TENANT", Commands: []string{"serve", "demo"},
		Default: "half of `SETTLE_MAX_IN_FLIGHT` (`500`)", Parses: "a whole number of requests up to `SETTLE_MAX_IN_FLIGHT`, `0` or `off` for no share",
		Short: "one tenant's share of SETTLE_MAX_IN_FLIGHT; one more of its requests gets 429 with Retry-After: 1",
		Doc: "how many API requests of one tenant `serve` and `demo` work on at once. `SETTLE_MAX_IN_FLIGHT` counts requests before " +
			"their token is read, so without a share one tenant's slow requests (long LLM streams) could take every place and have " +
			"every other tenant's requests shed with 503. Once its token names the tenant, one more request of a tenant at its " +
			"share is refused at once with 429, code `tenant_busy` and `Retry-After: 1`, before its body is read: nothing of it " +
			"is sent, a paid request (a refund, a job, an LLM call, an MCP `issue_refund`) is recorded as that tenant's refused " +
			"client request, and each is counted in `settle_http_tenant_share_refused_total` by route and tenant. " +
			"A background response of the Responses API holds its place until the gateway's following of it ends, though its " +
			"client had the queued response at once; those places are lent to reads and cancels of responses and to retries " +
			"that start no generation, so a tenant holds at most twice its share. " +
			"`SETTLE_MAX_IN_FLIGHT` stays the last guard of the whole server. `0`, `off`, or the whole of `SETTLE_MAX_IN_FLIGHT`: " +
			"no share; more than the whole is refused"})
	envMaxWriteBacklog = define(sectionProcess, setting{Name: "SETTLE_MAX_WRITE_BACKLOG", Commands: []string{"serve", "demo"},
		Default: "`250ms`", Parses: "a Go duration such as `250ms`, `0` or `off` for no limit",
		Short: "how long ledger writes may wait to be sent before API requests get 503 with Retry-After: 1",
		Doc: "how long the ledger's oldest write may wait for its batch to be sent before `serve` and `demo` refuse new API " +
			"requests as at `SETTLE_MAX_IN_FLIGHT`: 503, code `overloaded`, `Retry-After: 1`, before the request is read or " +
			"anything of it is recorded, counted in `settle_http_shed_total` with `reason=\"write_backlog\"`; the wait is " +
			"`settle_ledger_write_backlog_seconds`. Every API request writes the ledger first, and that wait grows first when the " +
			"database or the CPU cannot keep up, while most requests in flight only wait on a provider. A healthy replica's " +
			"writes wait a few milliseconds; the default sheds before every admitted call waits seconds. `0` or `off`: no limit"})
	envShutdownTimeout = define(sectionProcess, setting{Name: "SETTLE_SHUTDOWN_TIMEOUT", Commands: []string{"server commands"},
		Default: "the longest call plus `10s`: `SETTLE_REFUND_DEADLINE` + `10s` (`35s`), or with the LLM gateway on `SETTLE_LLM_DEADLINE` + `10s` when longer (`10m10s`)",
		Parses:  "a positive Go duration, at most `15m` (or `SETTLE_LLM_DEADLINE` + `10s` when longer)",
		Short:   "how long serve and demo wait after SIGTERM for work in flight",
		Doc: "how long `serve` and `demo` wait after SIGTERM or Ctrl-C: new connections are refused at once, background services start " +
			"no new work, and requests in flight and the services' work in hand (a refund or a reaper's resend waiting on Stripe, an LLM " +
			"call the provider is generating, a job's generation) finish and are recorded before the database closes; what still runs then " +
			"is left to the reaper, as after a crash. Give the process manager's grace period (Kubernetes' `terminationGracePeriodSeconds`, " +
			"30 s by default) more than this. With the LLM gateway on, a wait shorter than `SETTLE_LLM_DEADLINE` is taken and `serve` " +
			"warns of it at start: a stop may cut a call already sent, and paid, before its client has the answer, leave its operation " +
			"uncertain, and the client's retry of a call with no lookup could pay for a second generation " +
			"(`TestSigtermFinishesAnLLMCallInFlight` (`cmd/settle/llmshutdown_test.go`), " +
			"`TestShutdownWaitsForTheLongestLLMCall` (`cmd/settle/settings_limits_test.go`)); lower the deadline where a rollout " +
			"must not wait that long. More than 15 minutes, or than the LLM deadline plus 10 s when that is longer, is refused: a longer " +
			"wait finishes nothing the reaper would not (`TestShutdownTimeoutHasAnUpperLimit` (`cmd/settle/settings_limits_test.go`))"})
	envWorkerID = define(sectionProcess, setting{Name: "SETTLE_WORKER_ID", Commands: []string{"server commands"},
		Default: "*hostname*-*pid*", Parses: "text",
		Short: "this process's name in leases and the audit log",
		Doc:   "this process's name in leases and the audit log"})
)

// The settings of the tools around Settle: its agent's stdio server, the private Postgres
// clusters of the demo and the tests, and Go's runtime.
var (
	envMCPToken = define(sectionTools, setting{Name: "SETTLE_MCP_TOKEN", Commands: []string{"mcp"},
		Required: "required by `mcp --stdio`", Parses: "an API token",
		Short: "API token 'settle mcp --stdio' acts with (its tenant's refunds)",
		Doc:   "the API token `settle mcp --stdio` acts with; it decides the tenant", Secret: true})
	_ = define(sectionTools, setting{Name: "SETTLE_PG_BIN", Commands: []string{"demo", "go test", "settle-load"}, ReadIn: "ops/pg/localpg",
		Default: "initdb's folder in `PATH`, else the newest `/usr/lib/postgresql/NN/bin`", Parses: "a folder holding `initdb`",
		Short: "PostgreSQL server binaries for the private clusters of demo and the tests",
		Doc:   "PostgreSQL server binaries (`initdb`, `postgres`, `pg_basebackup`) for the private clusters of `demo`, the tests and `settle-load`"})
	_ = define(sectionTools, setting{Name: "SETTLE_TEST_DATABASE_URL", Commands: []string{"go test"}, ReadIn: "ops/pg/pgtest",
		Parses: "a PostgreSQL URL; its database name is replaced by each test's",
		Short:  "tests use this server (one database per test) instead of a private cluster",
		Doc:    "tests use this server (one database per test) instead of a private cluster", Secret: true})
	envGOGC = define(sectionTools, setting{Name: "GOGC", Commands: []string{"every command"},
		Default: "`400`", Parses: "a percentage, or `off` (Go's runtime reads it)",
		Short: "Go's garbage-collector target",
		Doc: "Go's garbage-collector target; settle raises Go's default of 100 because its heap is small and collections were the " +
			"largest part of the gateway's latency tail"})
	envGOMEMLIMIT = define(sectionTools, setting{Name: "GOMEMLIMIT", Commands: []string{"every command"},
		Default: "`90MiB`", Parses: "a size in bytes with an optional unit (`B`, `KiB`, `MiB`, `GiB`), or `off` (Go's runtime reads it)",
		Short: "Go's soft memory limit",
		Doc: "Go's soft memory limit: near it the garbage collector runs harder instead of letting the heap grow (settle's peak " +
			"resident memory at 500 gateway calls a second on a busy 2-core machine: 148 MB with 120MiB, 243 MB without). It " +
			"bounds only the runtime's memory: the resident set also holds about 40 MB of settle's own binary. A backlog " +
			"whose live heap outgrows it makes collections take up to half the CPU, so raise it, or set `off`, where answering " +
			"matters more than memory"})
)
