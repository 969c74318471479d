package main

// usage is what 'settle help' prints; LoadConfig's messages point people to it.
const usage = `Usage: settle <command> [flags]

Commands:
  serve [--addr 127.0.0.1:8080] [--migrate] [--secure-cookies]
                          serve the dashboard and the API (needs DATABASE_URL)
  migrate                 bring the database schema up to date (needs DATABASE_URL)
  demo [--addr ADDR]      run everything on a private Postgres in ./.settle/demo-pg
  user add --email E --role R
                          add a dashboard user; the password is read from standard input
  token add --tenant NAME [--name LABEL]
                          create an API token for a tenant (created if missing)
  token list              list API tokens: id, tenant, name, first characters, state
  token revoke --id N     revoke a token; servers refuse it within 5 s
  tenant stripe-account NAME acct_… | NAME --clear
                          bind a tenant to a Stripe connected account (its calls carry
                          Stripe-Account), or unbind it; refused while it has open refunds
  tenant approvals NAME [--min-cents N|off|default] [--not-executed on|off|default]
                          a tenant's four-eyes settings, over the SETTLE_APPROVAL_* ones
  tenant list             list tenants, the Stripe accounts they are bound to and their approval settings
  worker                  run pipeline job workers without the server (needs DATABASE_URL, SETTLE_LLM_BASE_URL)
  reconcile [--provider stripe] [--since 24h | --from RFC3339 --to RFC3339]
                          reconcile provider charges with the ledger once (needs DATABASE_URL)
  retention run [--dry-run]
                          remove closed operations older than SETTLE_RETENTION now, with progress
                          (needs DATABASE_URL); --dry-run counts them and the rows of no operation,
                          and removes nothing
  alerts export [--format prometheus]
                          write the alert rules as a Prometheus rules file
  mcp --stdio             serve the refund tools to a local AI agent on stdin/stdout
                          (needs DATABASE_URL, SETTLE_MCP_TOKEN and STRIPE_API_KEY)
  fake stripe [--addr 127.0.0.1:12111] [--faults SPEC] [--webhook-url URL]
                          run the stateful fake Stripe API
  fake llm [--addr 127.0.0.1:12112] [--faults SPEC] [--latency D] [--chunk-delay D]
                          run the stateful fake OpenAI-compatible provider (chat completions,
                          responses, embeddings)
  fake anthropic [--addr 127.0.0.1:12113] [--faults SPEC] [--latency D] [--chunk-delay D]
                          run the stateful fake Anthropic Messages API, with its usage report

Environment:
  DATABASE_URL            postgres://user@host:port/db
  SETTLE_ADDR             listen address, overridden by --addr
  SETTLE_LOG_LEVEL        debug, info, warn or error (default info)
  SETTLE_SECURE_COOKIES   true behind HTTPS
  STRIPE_API_KEY          Stripe secret key; refunds are off without it
  STRIPE_API_BASE         Stripe API base URL (default https://api.stripe.com)
  STRIPE_WEBHOOK_SECRET   signing secret of the Stripe webhook endpoint
  STRIPE_CONNECT_WEBHOOK_SECRET  signing secret of the Connect endpoint (connected accounts' events)
  SETTLE_STRIPE_TIMEOUT   one attempt at Stripe (default 8s)
  SETTLE_STRIPE_READS_PER_SECOND  reads at Stripe per second from this process, all tenants and
                          the reconciler together (default 20)
  SETTLE_STRIPE_TENANT_READS_PER_SECOND  one tenant's share of them (default half, at most the whole)
  SETTLE_STRIPE_TENANT_KEY    payment metadata key naming its tenant (default settle_tenant)
  SETTLE_STRIPE_TENANT_CHECK  on (default): a tenant refunds only its own payments (labelled, or in
                          its bound connected account); off: any payment it can see, for one tenant only
  SETTLE_REFUND_DEADLINE  one refund call, all attempts (default 25s, at most 55s)
  SETTLE_SHUTDOWN_TIMEOUT how long serve waits after SIGTERM for work in flight (default the refund deadline + 10s)
  SETTLE_OUTBOX_URL       receiver of outbox events (JSON POST)
  SETTLE_OUTBOX_KEEP      how long a delivered event stays in the outbox (default 168h)
  SETTLE_ROLLUP_MINUTES_KEEP  how long minute rollups are kept (default 840h, at least 48h)
  SETTLE_RETENTION        how long closed operations are kept after closing: 400d (default), 9600h, or off
  SETTLE_WORKER_ID        this process's name in leases (default host-pid)
  SETTLE_OPERATION_LEASE  how long a replica owns an operation it sends before another resumes it (default 30s, 5s to 10m)
  SETTLE_ROLE_LEASE       how long the reconciler or the alert evaluator stays with a replica that stopped renewing it (default 30s, at least 3s)
  SETTLE_LLM_BASE_URL     OpenAI-compatible provider, e.g. https://api.openai.com/v1; the gateway is off without it
  SETTLE_LLM_API_KEY      the provider's API key
  SETTLE_LLM_POLICY       interactive (resend within budget) or batch (never resend an uncertain call)
  SETTLE_LLM_TENANT_POLICIES  per tenant, e.g. acme=batch,shop=interactive
  SETTLE_LLM_PRICES       JSON price table per model (default: built in)
  SETTLE_LLM_KEY_TTL      how long an Idempotency-Key replays its answer (default 24h)
  SETTLE_LLM_BODY_KEEP    how long prompts and completions outlive the key's TTL (default 168h)
  SETTLE_LLM_STORE        auto (default), on or off: ask the provider to store each completion, so a call
                          whose answer was lost can be looked up (auto asks the provider once)
  SETTLE_LLM_KEY_SCOPE    whose requests share a key: tenant (default) or user (the request's user field
                          is part of the key), per tenant too, e.g. tenant,acme=user
  SETTLE_ALERT_RULES      alert rules file (Prometheus-shaped YAML; default: built in)
  SETTLE_ALERTMANAGER_URL Alertmanager base URL
  SETTLE_ALERT_WEBHOOK_URLS  comma-separated receivers of the Alertmanager v4 webhook payload
  SETTLE_EXTERNAL_URL     where people reach Settle; alerts link to /alerts, single sign-on's callback is under it
  SETTLE_OIDC_ISSUER      OpenID Connect provider's issuer URL: turns on single sign-on to the dashboard
  SETTLE_OIDC_CLIENT_ID, SETTLE_OIDC_CLIENT_SECRET  Settle's client at the provider
  SETTLE_OIDC_REDIRECT_URL  the callback registered at the provider (default SETTLE_EXTERNAL_URL/login/oidc/callback)
  SETTLE_OIDC_ROLE_CLAIM  ID token claim naming the person's groups (default groups)
  SETTLE_OIDC_ROLES       groups to roles, e.g. settle-admins=admin,settle-oncall=oncall (the most powerful wins)
  SETTLE_OIDC_PROVIDER_NAME  what the sign-in button calls the provider (default the issuer's host)
  SETTLE_OIDC_TRUSTED_EMAIL_CLAIM  ID token claim whose address is taken as confirmed when the email claim
                          is not, for a provider that sends no email_verified, e.g. preferred_username
                          for Entra ID (default none: only an email claim with email_verified=true)
  SETTLE_PASSWORD_LOGIN   on (default) or off: off leaves only single sign-on
  SETTLE_WORKERS          job workers inside serve and demo (default 2; 0 for separate 'settle worker' processes)
  SETTLE_JOB_WEBHOOK_URL  comma-separated receivers of job.published events
  SETTLE_JOB_RETRY_UNCERTAIN  true resends a job whose generation may have been billed (default false: it waits in Unknown)
  SETTLE_RECONCILE_INTERVAL  background reconciliation of serve (default 5m, "off" disables)
  SETTLE_APPROVAL_MIN_CENTS  a person's close of this amount or more needs a second person (default off)
  SETTLE_APPROVAL_NOT_EXECUTED  on: every close as not executed needs a second person (default off)
  SETTLE_APPROVAL_TTL     how long a proposed close may be approved (default 24h)
  SETTLE_MCP_TOKEN        API token 'settle mcp --stdio' acts with (its tenant's refunds)
`
