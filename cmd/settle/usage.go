package main

// usage is what 'settle help' prints, and what LoadConfig's messages point people to: the
// commands, then every variable of the table of settings (settings.go).
func usage() string { return commandsUsage + helpEnvironment() }

// commandsUsage is the commands part of 'settle help'.
const commandsUsage = `Usage: settle <command> [flags]

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
                          a tenant's four-eyes settings, over the SETTLE_APPROVAL_* ones; a flag
                          left out keeps the tenant's setting
  tenant budget NAME --budget AMOUNT|off
                          what a tenant's LLM calls may cost per UTC day, in the price table's
                          currency; new calls past it are refused with 429 until midnight UTC
  tenant list             list tenants, their Stripe accounts, approval settings and LLM budgets
  worker                  run pipeline job workers without the server (needs DATABASE_URL, SETTLE_LLM_BASE_URL)
  reconcile [--provider stripe] [--since 24h | --from RFC3339 --to RFC3339]
                          reconcile provider charges with the ledger once (needs DATABASE_URL)
  retention run [--dry-run]
                          remove closed operations older than SETTLE_RETENTION now, with progress
                          (needs DATABASE_URL, and SETTLE_RETENTION set as the servers have it);
                          --dry-run counts them and the rows of no operation, and removes nothing
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

`
