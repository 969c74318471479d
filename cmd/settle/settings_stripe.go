package main

// The settings of refunds: how Settle reaches Stripe, how long a refund may take, and the
// background reconciliation of Stripe's records with the ledger.

var (
	envStripeAPIKey = define(sectionStripe, setting{Name: "STRIPE_API_KEY", Commands: []string{"server commands"},
		Parses: "a Stripe secret key",
		Short:  "Stripe secret key; refunds are off without it",
		Doc:    "Stripe secret key; the refund route answers 503 without it", Secret: true})
	envStripeAPIBase = define(sectionStripe, setting{Name: "STRIPE_API_BASE", Commands: []string{"server commands"},
		Default: "`https://api.stripe.com`", Parses: "an http(s) URL",
		Short: "Stripe API base URL",
		Doc:   "Stripe API base URL (the demo and tests point it at the fake)", Secret: true})
	envStripeWebhookSecret = define(sectionStripe, setting{Name: "STRIPE_WEBHOOK_SECRET", Commands: []string{"server commands"},
		Parses: "a webhook signing secret (`whsec_…`)",
		Short:  "signing secret of the Stripe webhook endpoint",
		Doc: "signing secret of the platform account's endpoint at `/webhooks/stripe`; webhooks are off without it and " +
			"`STRIPE_CONNECT_WEBHOOK_SECRET`", Secret: true})
	envStripeConnectWebhookSecret = define(sectionStripe, setting{Name: "STRIPE_CONNECT_WEBHOOK_SECRET", Commands: []string{"server commands"},
		Parses: "a webhook signing secret (`whsec_…`)",
		Short:  "signing secret of the Connect endpoint (connected accounts' events)",
		Doc: "signing secret of the Connect endpoint (connected accounts' events), which may point at the same `/webhooks/stripe`: " +
			"needed once a tenant is bound to a connected account (see [Stripe connected accounts](stripe-connect.md))", Secret: true})
	envStripeTenantKey = define(sectionStripe, setting{Name: "SETTLE_STRIPE_TENANT_KEY", Commands: []string{"server commands"},
		Default: "`settle_tenant`", Parses: "a Stripe metadata key: at most 40 characters, no brackets or spaces",
		Short: "payment metadata key naming its tenant",
		Doc:   "the PaymentIntent metadata key that names the tenant a platform payment belongs to"})
	envStripeTenantCheck = define(sectionStripe, setting{Name: "SETTLE_STRIPE_TENANT_CHECK", Commands: []string{"server commands"},
		Default: "`on`", Parses: "`on` or `off`",
		Short: "on: a tenant refunds only its own payments (labelled, or in its bound connected account); off: any payment it can see, for one tenant only",
		Doc: "`on`: a tenant bound to a connected account refunds that account's payments (every call carries `Stripe-Account`); any " +
			"other tenant refunds only platform payments whose metadata carries its name; anything else is answered like a payment " +
			"Stripe does not have. `off`: the metadata check is off, so any API token of a tenant that is not bound may refund any " +
			"payment of the platform account — only for an install with one tenant, since every token then holds the whole " +
			"account's refunds (a bound tenant still reaches its own account only)"})
	envStripeTimeout = define(sectionStripe, setting{Name: "SETTLE_STRIPE_TIMEOUT", Commands: []string{"server commands"},
		Default: "`8s`", Parses: "a positive Go duration, at most `SETTLE_REFUND_DEADLINE`",
		Short: "one attempt at Stripe",
		Doc:   "one HTTP attempt at Stripe"})
	envStripeReads = define(sectionStripe, setting{Name: "SETTLE_STRIPE_READS_PER_SECOND", Commands: []string{"server commands"},
		Default: "`20`", Parses: "a positive number, e.g. `2.5`",
		Short: "reads at Stripe per second from this process, all tenants and the reconciler together",
		Doc: "reads at Stripe per second from this process, for every tenant and the reconciler together: a refund's payment check " +
			"(two reads: the payment and its refunds), lookups and the reconciler's listings; refund creation is not counted. A read " +
			"that would wait past its call's deadline is answered 503 `unavailable` and counted in " +
			"`settle_stripe_reads_refused_total`. Stripe limits each account, not each process: keep this times the replicas under " +
			"your account's read limit, with room for anything else using the key"})
	envStripeTenantReads = define(sectionStripe, setting{Name: "SETTLE_STRIPE_TENANT_READS_PER_SECOND", Commands: []string{"server commands"},
		Default: "half of `SETTLE_STRIPE_READS_PER_SECOND`", Parses: "a positive number, at most `SETTLE_STRIPE_READS_PER_SECOND`",
		Short: "one tenant's share of those reads",
		Doc: "one tenant's share of those reads (the reconciler has a share of its own), so one tenant's burst cannot hold up " +
			"another's refunds"})
	envRefundDeadline = define(sectionStripe, setting{Name: "SETTLE_REFUND_DEADLINE", Commands: []string{"server commands"},
		Default: "`25s`", Parses: "a positive Go duration, at most `55s`",
		Short: "one refund call, all attempts and backoff included",
		Doc: "one refund call, every attempt and backoff included; at most `55s` so a call fits a client's 60 s request timeout, " +
			"and never shorter than one attempt"})
	envReconcileInterval = define(sectionStripe, setting{Name: "SETTLE_RECONCILE_INTERVAL", Commands: []string{"server commands"},
		Default: "`5m`", Parses: "a positive Go duration, or `off`",
		Short: "how often serve and demo reconcile provider charges with the ledger; off disables",
		Doc:   "how often `serve` and `demo` reconcile provider charges with the ledger (`off` disables); one replica acts at a time"})
)
