package main

// The settings of what serve and demo run beside the API: the outboxes and notifications,
// the rollups, the retention, and the leases that let replicas share the work.

var (
	envOutboxURL = define(sectionServer, setting{Name: "SETTLE_OUTBOX_URL", Commands: []string{"server commands"},
		Parses: "an http(s) URL",
		Short:  "receiver of outbox events (JSON POST)",
		Doc: "receives outbox events as JSON POSTs (`Settle-Event-Id` header); a server with it registers its receiver as the " +
			"consumer of every tenant's and kind's events (`outbox_consumers`), and a change writes its outbox event only while " +
			"some consumer is registered for its tenant and kind: without one, no event is written (and none is written later)",
		Secret: true})
	envOutboxKeep = define(sectionServer, setting{Name: "SETTLE_OUTBOX_KEEP", Commands: []string{"server commands"},
		Default: "`168h`", Parses: "a positive Go duration",
		Short: "how long a delivered event stays in the outbox",
		Doc: "how long a delivered event stays in the outbox, the job outbox and the follow-ups' outbox (pruned hourly); " +
			"undelivered events are never deleted"})
	envNotifyWebhookURL = define(sectionServer, setting{Name: "SETTLE_NOTIFY_WEBHOOK_URL", Commands: []string{"server commands"},
		Parses: "an http(s) URL",
		Short:  "receives Slack-compatible JSON for each settled follow-up",
		Doc: "receives a POST of Slack-compatible JSON (`{\"text\": …, \"blocks\": […]}`, e.g. a Slack incoming webhook) for each " +
			"settled follow-up: what settled, the outcome, the sentence to send, whose follow-up, and the notification's id (also in " +
			"the `Settle-Event-Id` header)", Secret: true})
	envSMTPURL = define(sectionServer, setting{Name: "SETTLE_SMTP_URL", Commands: []string{"server commands"},
		Parses: "`smtp://user:pass@host:587?from=…` or `smtps://…`",
		Short:  "mails each settled follow-up to the follower: smtp://user:pass@host:587?from=settle@example.com",
		Doc: "mails each settled follow-up to the follower's sign-in email: `smtp://user:pass@host:587?from=settle@example.com` " +
			"(STARTTLS whenever the server offers it; the password goes only over TLS or to localhost) or `smtps://…` (TLS from " +
			"the start, port 465 by default); `from` is required", Secret: true})
	envRollupMinutesKeep = define(sectionServer, setting{Name: "SETTLE_ROLLUP_MINUTES_KEEP", Commands: []string{"server commands"},
		Default: "`840h` (35 days)", Parses: "a Go duration, at least `48h`",
		Short: "how long minute rollups and minute backlog snapshots are kept",
		Doc: "how long minute rollups and minute backlog snapshots are kept; quarter hours, hours and hourly snapshots are kept " +
			"for good, and an old operation that changes has its hours recomputed from the ledger"})
	envRetention = define(sectionServer, setting{Name: "SETTLE_RETENTION", Commands: []string{"server commands"},
		Default: "`400d`", Required: "required by `retention run` without `--dry-run`",
		Parses: "days (`400d`), a Go duration (`9600h`), or `off`",
		Short:  "how long closed operations are kept after closing, or off to keep everything",
		Doc: "how long a closed (succeeded or failed) operation is kept after its closing, with every row hanging from it; `off` " +
			"keeps everything. Open operations are never removed, whatever their age. Refused at start, in one line, when shorter " +
			"than 31 days (how far back the reconciler reads the provider's records after an outage), than `SETTLE_LLM_KEY_TTL` " +
			"plus `SETTLE_LLM_BODY_KEEP`, or than `SETTLE_OUTBOX_KEEP`; `settle reconcile` refuses a window that starts before it " +
			"(see [Retention](operating.md#retention))"})
	envRoleLease = define(sectionServer, setting{Name: "SETTLE_ROLE_LEASE", Commands: []string{"server commands"},
		Default: "`30s`", Parses: "a Go duration, from `3s` to `10m`",
		Short: "how long the reconciler or the alert evaluator stays with a replica that stopped renewing it",
		Doc: "how long a background role that runs on one replica at a time (the reconciler, the alert evaluator) stays with a " +
			"replica that stopped renewing it; the holder renews it every third, so after a replica dies another takes the role " +
			"over within this (see [Operating](operating.md))"})
	envOperationLease = define(sectionServer, setting{Name: "SETTLE_OPERATION_LEASE", Commands: []string{"server commands"},
		Default: "`30s`", Parses: "a Go duration, `5s` to `10m`",
		Short: "how long a replica owns an operation it sends before another resumes it",
		Doc: "how long a replica owns an operation it is sending before another may take it over and send it again with the same " +
			"provider key: after a replica dies, or loses its database in a failover with a provider call in flight, the operation " +
			"is resumed this long after its last renewal. The owner renews it every third, a short lease also caps the waits " +
			"between a call's attempts at half of it, and the reaper looks every 5 s or every half lease when that is shorter. Keep " +
			"it longer than the database may pause, or a second replica resends a call still running (a refund stays single under " +
			"Stripe's key, an LLM call may be billed twice)"})
)
