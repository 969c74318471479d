# Settle: `make demo` runs the product on a private Postgres with demo data; `make test` runs
# everything. Both install what is missing first.
SHELL := /bin/bash
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false
GO ?= go

.PHONY: demo test check bench bench-compare deps generate check-generated lint build vendor chromium alerting pgbouncer stripe-mock

demo: deps build
	./bin/settle demo

build:
	$(GO) build -o bin/settle ./cmd/settle

# go test runs two packages at a time (one a core) and starts them in the order named: the
# longest (web, cmd/settle, ops/pg) are named first, so that they run beside the short ones
# instead of alone at the end, where web under the race detector alone took minutes.
LONGEST_FIRST := ./web/ ./cmd/settle/ ./ops/pg/
test: deps check-generated lint
	$(GO) test -race -count=1 -timeout 20m $(LONGEST_FIRST) ./...

# check is the quick loop: the unit and Postgres tests without the race detector, leaving
# out (with -short) the browser, Alertmanager, pgbouncer, failover, crash and chaos tests
# that make test runs. A test that needs a program the machine lacks skips and names the
# command that installs it, unless SETTLE_TEST_STRICT=1.
check:
	$(GO) test -short -count=1 -timeout 10m $(LONGEST_FIRST) ./...

bench: deps
	cd bench && $(GO) test -run '^$$' -bench . -benchtime=5s -timeout 120m .
	$(GO) test -run '^$$' -bench GatewayOverhead -benchtime=3000x ./ops/llm/

# bench-compare runs the lifecycle and gateway benchmarks of BASE (default d849190) and of
# this working tree in the same sitting, alternating, and prints the after/before ratios
# and the gateway's durable figures (bench/compare.sh).
bench-compare: deps
	bash bench/compare.sh $(BASE)

# chaos runs the deterministic fault simulation of internal/chaos: 10,000 seeded schedules of
# refunds, LLM calls and jobs against the fakes on one private Postgres, with the invariants
# checked after each. SEED=n runs that seed alone; SEEDS=n runs seeds 1 to n. make test runs 300.
.PHONY: chaos
chaos:
	SETTLE_CHAOS_SEEDS=$(or $(SEEDS),10000) SETTLE_CHAOS_SEED=$(SEED) $(GO) test -count=1 -timeout 60m -run '^TestChaos$$' -v ./internal/chaos/

# load drives DURATION (default 60s) of mixed traffic at RATE requests/s (default 50) through
# real HTTP against two `settle serve` processes on a private, durable Postgres, kills one with
# SIGKILL at 40 % of the run and starts it again 5 s later, and prints what held
# (cmd/settle-load); it fails when an operation was lost or a charge was made twice.
# FAULTS=false runs the fakes without their faults, for capacity; SEED=n repeats a mix.
.PHONY: load
load: deps build
	$(GO) run ./cmd/settle-load -settle bin/settle -rate $(or $(RATE),50) -duration $(or $(DURATION),60s) \
		$(if $(SEED),-seed $(SEED)) $(if $(FAULTS),-faults=$(FAULTS))

# bench-gateway measures what the LLM gateway adds under load, beside a bare reverse proxy, on
# each of its APIs (APIS, default chat,responses,messages,embeddings): requests, half of them
# streamed (embeddings never), offered open loop at each rate of RATES per second (default
# 100,300,500) for DURATION each (default 60s) to the fake provider directly (the fake LLM, or
# the fake Anthropic for messages), through a plain httputil.ReverseProxy process, and through
# `settle serve` on a private, durable Postgres, the three in turn on each API at each rate; it
# prints the latency each adds, failures, CPU per request (the load generator's and the
# fakes' own too) and peak RSS (cmd/settle-load gateway). ROUNDS=n cuts each rate's time into
# n turns. APIS=chat measures chat completions alone, a quarter of the whole run's time.
# STATEMENTS=1 has the cluster count Postgres's statements and reports each phase's
# statements, executor and planning time, WAL bytes and WAL records (index entries, row
# versions, commits) per request.
BENCH_GATEWAY_RATES := 100,300,500
.PHONY: bench-gateway
bench-gateway: deps build
	$(GO) run ./cmd/settle-load gateway -settle bin/settle -rates $(or $(RATES),$(BENCH_GATEWAY_RATES)) \
		-duration $(or $(DURATION),60s) $(if $(ROUNDS),-rounds $(ROUNDS)) $(if $(APIS),-apis $(APIS))

# deps installs what the two commands need on a fresh Debian machine: as root with apt-get,
# otherwise it names the missing packages and stops.
deps:
	@command -v go >/dev/null || { echo "Go is not installed: Settle needs Go 1.26"; exit 1; }
	@missing=""; \
	if [ -z "$$SETTLE_PG_BIN" ] && ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then missing="postgresql"; fi; \
	if [ "$$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then missing="postgresql"; fi; \
	command -v git >/dev/null || missing="$$missing git"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages:$$missing; install them with: sudo apt-get install -y $$missing"; exit 1; fi; \
		echo "installing$$missing"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
		for c in /etc/postgresql/*/main; do [ -d "$$c" ] && pg_ctlcluster "$$(basename "$$(dirname "$$c")")" main stop >/dev/null 2>&1; done; true; \
	fi
	@$(MAKE) --no-print-directory vendor chromium alerting pgbouncer patroni stripe-mock

# alerting installs the real Alertmanager and promtool the alert tests run against. Their
# Debian packages start services on install; policy-rc.d keeps them from starting.
alerting:
	@if [ ! -x /usr/bin/prometheus-alertmanager ] || [ ! -x /usr/bin/promtool ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages: sudo apt-get install -y prometheus-alertmanager prometheus"; exit 1; fi; \
		printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-alertmanager prometheus >/dev/null; \
		rc=$$?; rm -f /usr/sbin/policy-rc.d; exit $$rc; \
	fi

# pgbouncer is the connection pooler the replica tests put between Settle and Postgres, in
# transaction mode. Its Debian package starts a service on install; policy-rc.d keeps it from
# starting.
pgbouncer:
	@if [ ! -x /usr/sbin/pgbouncer ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "missing Debian package: sudo apt-get install -y pgbouncer"; exit 1; fi; \
		printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null; \
		rc=$$?; rm -f /usr/sbin/policy-rc.d; exit $$rc; \
	fi

# patroni is the failover manager the Patroni failover tests run two PostgreSQL nodes under,
# with etcd (etcd-server) as the store it keeps the leader in. Their Debian packages start
# services on install; policy-rc.d keeps them from starting.
.PHONY: patroni
patroni:
	@if [ ! -x /usr/bin/patroni ] || [ ! -x /usr/bin/etcd ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages: sudo apt-get install -y patroni etcd-server"; exit 1; fi; \
		printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends patroni etcd-server >/dev/null; \
		rc=$$?; rm -f /usr/sbin/policy-rc.d; exit $$rc; \
	fi

# vendor installs htmx from npm (pinned by the lock file) into static/vendor, which the
# binary embeds; no CDN.
vendor: static/vendor/htmx.min.js
static/vendor/htmx.min.js: package.json package-lock.json
	@command -v npm >/dev/null || { [ "$$(id -u)" = 0 ] || { echo "npm is missing: sudo apt-get install -y npm"; exit 1; }; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null; }
	npm ci --no-audit --no-fund
	npm run --silent vendor

# stripe-mock checks the Stripe adapter's request shapes against Stripe's OpenAPI.
STRIPE_MOCK_VERSION := v0.203.0
stripe-mock:
	@command -v stripe-mock >/dev/null || [ -x "$$($(GO) env GOPATH | cut -d: -f1)/bin/stripe-mock" ] || \
		GOFLAGS= $(GO) install github.com/stripe/stripe-mock@$(STRIPE_MOCK_VERSION)

# chromium is what the browser tests drive, headless.
chromium:
	@[ -x /usr/bin/chromium ] || { [ "$$(id -u)" = 0 ] || { echo "chromium is missing: sudo apt-get install -y chromium"; exit 1; }; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

generate:
	$(GO) tool templ generate -path views

# The generated templ code is committed; it must match the templates.
check-generated:
	@$(GO) tool templ generate -path views >/dev/null 2>&1
	@if ! git diff --quiet -- '*_templ.go' 2>/dev/null || [ -n "$$(git ls-files --others --exclude-standard -- '*_templ.go')" ]; then \
		echo "generated templ code is out of date: run 'make generate' and commit the result"; \
		git --no-pager diff --stat -- '*_templ.go'; exit 1; fi

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
