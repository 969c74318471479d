package main

// The settings of the LLM gateway and of the pipeline jobs that call the same provider.

var (
	envLLMBaseURL = define(sectionLLM, setting{Name: "SETTLE_LLM_BASE_URL", Commands: []string{"server commands"},
		Parses: "an http(s) URL",
		Short:  "OpenAI-compatible provider, e.g. https://api.openai.com/v1; the gateway is off without it",
		Doc:    "OpenAI-compatible provider, e.g. `https://api.openai.com/v1`; `/v1/chat/completions` is off without it", Secret: true})
	envLLMAPIKey = define(sectionLLM, setting{Name: "SETTLE_LLM_API_KEY", Commands: []string{"server commands"},
		Parses: "the provider's key",
		Short:  "the provider's API key",
		Doc:    "the provider's API key, sent as the bearer token", Secret: true})
	envAnthropicBaseURL = define(sectionLLM, setting{Name: "SETTLE_ANTHROPIC_BASE_URL", Commands: []string{"server commands"},
		Parses: "an http(s) URL",
		Short:  "Anthropic's API root as its SDKs take it, without /v1, e.g. https://api.anthropic.com; /v1/messages is off without it",
		Doc: "Anthropic's API root as its SDKs take it, without `/v1`, e.g. `https://api.anthropic.com`; `/v1/messages` (the " +
			"Messages API, with the gateway's other settings) is off without it", Secret: true})
	envAnthropicAPIKey = define(sectionLLM, setting{Name: "SETTLE_ANTHROPIC_API_KEY", Commands: []string{"server commands"},
		Parses: "Anthropic's API key",
		Short:  "Anthropic's API key",
		Doc:    "Anthropic's API key, sent as `x-api-key`", Secret: true})
	envAnthropicAdminKey = define(sectionLLM, setting{Name: "SETTLE_ANTHROPIC_ADMIN_KEY", Commands: []string{"server commands"},
		Parses: "an Anthropic Admin API key (`sk-ant-admin…`)",
		Short:  "Anthropic Admin API key: the reconciler compares Anthropic's usage report with Settle's Messages calls minute by minute",
		Doc: "an Admin API key of Anthropic's organization, sent as `x-api-key` to read its Messages usage report " +
			"(`/v1/organizations/usage_report/messages`, one-minute buckets by model and key); with it, and " +
			"`SETTLE_ANTHROPIC_BASE_URL`, the reconciler compares the prompt tokens billed each minute with the prompts of " +
			"Settle's Messages calls and reports a minute that billed a call twice, or more than Settle sent; it closes no call", Secret: true})
	envAnthropicAPIKeyID = define(sectionLLM, setting{Name: "SETTLE_ANTHROPIC_API_KEY_ID", Commands: []string{"server commands"},
		Default: "every key of the organization", Parses: "an Anthropic API key id (`apikey_…`)",
		Short: "the id of SETTLE_ANTHROPIC_API_KEY in Anthropic's console: the usage comparison reads that key's usage only",
		Doc: "the id (`apikey_…`) of `SETTLE_ANTHROPIC_API_KEY` as Anthropic's console shows it: the reconciler then compares " +
			"only that key's usage; without it, every key of the organization counts as Settle's, and what other clients " +
			"spend shows as usage Settle did not send"})
	envLLMProviderName = define(sectionLLM, setting{Name: "SETTLE_LLM_PROVIDER_NAME", Commands: []string{"server commands"},
		Default: "`openai`", Parses: "text",
		Short: "the provider's name on operations",
		Doc:   "the provider's name on operations"})
	envLLMPolicy = define(sectionLLM, setting{Name: "SETTLE_LLM_POLICY", Commands: []string{"server commands"},
		Default: "`interactive`", Parses: "`interactive` or `batch`",
		Short: "interactive (resend within budget) or batch (never resend an uncertain call)",
		Doc: "`interactive`: an uncertain call may be resent within the budget, each resend counted as a possible duplicate; " +
			"`batch`: never resent, the operation waits in Unknown"})
	envLLMTenantPolicies = define(sectionLLM, setting{Name: "SETTLE_LLM_TENANT_POLICIES", Commands: []string{"server commands"},
		Parses: "comma-separated `tenant=interactive` or `tenant=batch`",
		Short:  "per tenant, e.g. acme=batch,shop=interactive",
		Doc:    "`SETTLE_LLM_POLICY` per tenant, e.g. `acme=batch,shop=interactive`"})
	envLLMPrices = define(sectionLLM, setting{Name: "SETTLE_LLM_PRICES", Commands: []string{"server commands", "tenant budget", "tenant list"},
		Default: "built in", Parses: "a JSON file",
		Short: "JSON price table per model; its currency is the one tenants' LLM budgets count in",
		Doc: "JSON price table per model (per 1 M tokens, and optionally the most tokens of one answer, `max_output_tokens`, " +
			"which bounds a budgeted tenant's calls that name no cap); an unknown model is accepted with its cost marked unknown. Its " +
			"`currency` (dollars by default) is the one tenants' LLM budgets and spends are counted in: `settle tenant budget` " +
			"and `settle tenant list` read it to name that currency, and refuse a table the servers would refuse"})
	envLLMKeyTTL = define(sectionLLM, setting{Name: "SETTLE_LLM_KEY_TTL", Commands: []string{"server commands"},
		Default: "`24h`", Parses: "a Go duration, longer than `SETTLE_LLM_DEADLINE` plus an hour",
		Short: "how long an Idempotency-Key replays its answer",
		Doc:   "how long an `Idempotency-Key` replays its answer"})
	envLLMBodyKeep = define(sectionLLM, setting{Name: "SETTLE_LLM_BODY_KEEP", Commands: []string{"server commands"},
		Default: "`168h` (7 days)", Parses: "a Go duration, at least `1h`",
		Short: "how long prompts and completions outlive the key's TTL",
		Doc: "how long prompts and completions outlive the key's TTL: then a background purge (small batches, one replica at a " +
			"time) deletes an LLM operation's request and result, and a published or failed job's document and results (jobs " +
			"count from `SETTLE_LLM_KEY_TTL` too); the operation, its usage and fingerprint stay, and a replay of its key gets " +
			"410 `answer_purged`"})
	envLLMStore = define(sectionLLM, setting{Name: "SETTLE_LLM_STORE", Commands: []string{"server commands"},
		Default: "`auto`", Parses: "`auto`, `on` or `off`",
		Short: "ask the provider to store each completion, so a call whose answer was lost can be looked up (auto asks the provider once)",
		Doc: "whether each attempt asks the provider to keep its completion (`store: true`, with `metadata.settle_operation_id` " +
			"and `metadata.settle_tenant`; the client's own metadata is kept, Settle's keys win, and a client's `store: false` is " +
			"honoured), so a call whose answer was lost can be looked up in its stored completions from `/ops` and by the " +
			"reconciler (after 2 minutes unknown). `auto` asks the provider once whether it lists stored completions and " +
			"remembers; a provider that refuses `store` gets plain calls"})
	envLLMKeyScope = define(sectionLLM, setting{Name: "SETTLE_LLM_KEY_SCOPE", Commands: []string{"server commands"},
		Default: "`tenant`", Parses: "`tenant` or `user`, and comma-separated `tenant-name=tenant` or `tenant-name=user`",
		Short: "whose requests share a key: tenant or user (the request's user field is part of the key), per tenant too, e.g. tenant,acme=user",
		Doc: "whose requests share a key: `tenant`, or `user` (the request's `user` field is part of the key, so two end users " +
			"reusing a key get two answers, never each other's); per tenant too, e.g. `tenant,acme=user`"})
	envLLMAttemptTimeout = define(sectionLLM, setting{Name: "SETTLE_LLM_ATTEMPT_TIMEOUT", Commands: []string{"server commands"},
		Default: "`10m`", Parses: "a positive Go duration",
		Short: "one send to the provider",
		Doc:   "one send to the provider"})
	envLLMDeadline = define(sectionLLM, setting{Name: "SETTLE_LLM_DEADLINE", Commands: []string{"server commands"},
		Default: "`10m`", Parses: "a positive Go duration",
		Short: "one gateway call, every attempt included",
		Doc:   "one gateway call, every attempt included"})
	envLLMMaxWait = define(sectionLLM, setting{Name: "SETTLE_LLM_MAX_WAIT", Commands: []string{"server commands"},
		Default: "`60s`", Parses: "a positive Go duration",
		Short: "the longest Prefer: wait=N honoured",
		Doc:   "the longest `Prefer: wait=N` honoured"})
)

var (
	envWorkers = define(sectionJobs, setting{Name: "SETTLE_WORKERS", Commands: []string{"server commands"},
		Default: "`2`", Parses: "a whole number, `0` to `64`",
		Short: "job workers inside serve and demo (0 for separate 'settle worker' processes), and in 'settle worker' (at least 1)",
		Doc: "pipeline job workers inside `serve` and `demo` (`0`: none, for separate `settle worker` processes; they run only " +
			"with `SETTLE_LLM_BASE_URL`), and in `settle worker` (at least one)"})
	envJobWebhookURL = define(sectionJobs, setting{Name: "SETTLE_JOB_WEBHOOK_URL", Commands: []string{"server commands"},
		Parses: "comma-separated http(s) URLs",
		Short:  "comma-separated receivers of job.published events",
		Doc: "comma-separated receivers of `job.published` (JSON POST with `Settle-Event-Id`), registered by the processes " +
			"that run job workers as the consumer of every tenant's job events: a job writes its event only while one is " +
			"registered, so without it none is written, the undelivered events left for former receivers are deleted at " +
			"start, and a receiver added later gets no event of earlier jobs; give serve and workers the same value", Secret: true})
	envJobLease = define(sectionJobs, setting{Name: "SETTLE_JOB_LEASE", Commands: []string{"server commands"},
		Default: "`30s`", Parses: "a positive Go duration",
		Short: "a worker's hold on a job; a dead worker's job is taken over after it",
		Doc:   "a worker's hold on a job and its generation; a dead worker's job is taken over after it"})
	envJobRetryUncertain = define(sectionJobs, setting{Name: "SETTLE_JOB_RETRY_UNCERTAIN", Commands: []string{"server commands"},
		Default: "`false`", Parses: "a boolean: `true`, `false`, `1`, `0`, `t`, `f`",
		Short: "true resends a job whose generation may have been billed; false: it waits in Unknown",
		Doc:   "`false` (batch): a job whose generation may have been billed waits in Unknown; `true`: resend, counted as a possible duplicate"})
	envJobMaxAttempts = define(sectionJobs, setting{Name: "SETTLE_JOB_MAX_ATTEMPTS", Commands: []string{"server commands"},
		Default: "`3`", Parses: "a whole number from `1` to `6`",
		Short: "sends per job, at most an operation's 6 attempts",
		Doc: "sends per job; a job's generation is one operation, which makes at most 6 attempts (ops rule 4), so " +
			"more is refused (`TestJobMaxAttemptsFitsTheOperationsAttempts` (`cmd/settle/settings_limits_test.go`))"})
	envJobDeadline = define(sectionJobs, setting{Name: "SETTLE_JOB_DEADLINE", Commands: []string{"server commands"},
		Default: "`1h`", Parses: "a positive Go duration",
		Short: "a job's total deadline",
		Doc:   "a job's total deadline"})
	envJobMaxCostMicros = define(sectionJobs, setting{Name: "SETTLE_JOB_MAX_COST_MICROS", Commands: []string{"server commands"},
		Default: "`0` (no cap)", Parses: "a whole number, `0` or more",
		Short: "a job's cost budget in price table micro-units",
		Doc:   "a job's cost budget (price table micro-units)"})
	envWorkerMetricsAddr = define(sectionJobs, setting{Name: "SETTLE_WORKER_METRICS_ADDR", Commands: []string{"worker"},
		Default: "off", Parses: "`host:port` (port `0`: any free one)",
		Short: "'settle worker' serves /metrics, /healthz and /readyz on a listener there",
		Doc: "`settle worker` serves `/metrics` (its job workers' runs and LLM budget refusals, the clock skew, Go's runtime " +
			"and the process), `/healthz` and `/readyz` on a listener of its own at this `host:port` (e.g. `10.0.3.21:9091`), " +
			"to whoever reaches it (with `SETTLE_METRICS_TOKEN`, only its bearer), so keep it off public networks. Off by " +
			"default, as `SETTLE_METRICS_ADDR` is, so that two workers on one host never contend for a port; unset, the " +
			"worker serves nothing ([metrics](metrics.md#job-workers))"})
)
