package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/alerts"
	"github.com/settle-dev/settle/internal/proctest"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/opstest"
	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// secretURL is a receiver nobody listens on whose path is its credential, as a Slack
// incoming webhook's is.
const secretURL = "http://127.0.0.1:1/services/SECRET"

// TestNoSecretOfAReceiverURLInARowOrALog runs serve with every receiver that posts (the
// operations' outbox, the follow-ups' webhook and mail, Alertmanager and an alert webhook) at
// an address whose path, password or query is a secret, and nobody listening. Every
// delivery fails; the failures are recorded in the outboxes' rows and may be logged, and
// neither any row of the database nor any log line holds the secret: they name the host and
// the reason only.
func TestNoSecretOfAReceiverURLInARowOrALog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vars := map[string]string{"DATABASE_URL": pgtest.URL(pgtest.NewDatabase(t)),
		"SETTLE_OUTBOX_URL":         secretURL + "?token=SECRET",
		"SETTLE_NOTIFY_WEBHOOK_URL": secretURL,
		"SETTLE_SMTP_URL":           "smtp://settle:SECRET@127.0.0.1:1?from=settle@example.com",
		"SETTLE_ALERTMANAGER_URL":   "http://user:SECRET@127.0.0.1:1/SECRET",
		"SETTLE_ALERT_WEBHOOK_URLS": secretURL}
	cfg, err := LoadConfig([]string{"serve", "--addr", "127.0.0.1:0"}, env(vars), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var logs proctest.Buffer
	p := NewProgram(cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	db, err := pgx.Connect(ctx, vars["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)

	settleFollowedRefund(t, p)
	// A test notification to every alert receiver, as the alerts page's button sends it.
	receivers := alerts.Receivers(cfg.Alerts.AlertmanagerURL, cfg.Alerts.WebhookURLs, nil, "")
	ev := &alerts.Evaluator{Store: alertstore.New(p.DB), Clock: p.Clock, Receivers: alerts.Infos(receivers)}
	if _, err := ev.SendTest(ctx, "admin@example.com"); err != nil {
		t.Fatal(err)
	}

	tables := []string{"outbox", "follow_up_outbox", "alert_outbox"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		waiting := 0
		for _, table := range tables {
			waiting += countRows(t, db, `SELECT count(*) FROM `+table+` WHERE published_at IS NULL AND last_error = ''`)
		}
		if waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows still wait for a first delivery attempt", waiting)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, table := range tables {
		rows, err := db.Query(ctx, `SELECT last_error FROM `+table)
		if err != nil {
			t.Fatal(err)
		}
		errs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if len(errs) == 0 {
			t.Errorf("%s: no row written", table)
		}
		for _, e := range errs {
			if !strings.Contains(e, "127.0.0.1:1") {
				t.Errorf("%s: last error %q does not name the receiver's host", table, e)
			}
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, where := range rowsHolding(t, db, "SECRET") {
		t.Errorf("a row of %s holds the secret of a receiver's URL", where)
	}
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "SECRET") {
			t.Errorf("a log line holds the secret of a receiver's URL: %s", line)
		}
	}
}

// settleFollowedRefund records a refund that a person follows, leaves it unknown and closes
// it, so the operations' outbox and the follow-ups' outbox (both channels) each get rows.
func settleFollowedRefund(t *testing.T, p *Program) {
	t.Helper()
	ctx := context.Background()
	var tenant, user int64
	if err := p.DB.Pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('shop') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	if err := p.DB.Pool.QueryRow(ctx, `INSERT INTO users (email, password_hash, role) VALUES ('sam@example.com', 'x', 'support') RETURNING id`).Scan(&user); err != nil {
		t.Fatal(err)
	}
	in := ops.Intent{TenantID: tenant, Kind: ops.KindRefund, Provider: "stripe", IntentKey: "4520:3800:usd",
		Fingerprint: "fp-4520", OrderRef: "4520", AmountCents: 3800, Currency: "usd", PaymentRef: "pi_1", Retention: 24 * time.Hour}
	seed := opstest.New(p.Ledger, p.DB)
	o, err := seed.Open(ctx, in, "req-4520", "w1")
	if err != nil {
		t.Fatal(err)
	}
	op, err := seed.Finish(ctx, o.Op, o.Attempt, "w1", ops.AttemptResult{Outcome: ops.OutcomeServerError, HTTPStatus: 500})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deskstore.New(p.DB).AddFollowUp(ctx, user, op.ID, p.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ledger.Close(ctx, ops.CloseParams{ID: op.ID, Version: op.Version, To: ops.StatusSucceeded, Actor: "oncall@example.com",
		Evidence: ops.Evidence{Kind: ops.EvidenceLookup, ProviderRef: "re_4520", Summary: "found at Stripe"}}); err != nil {
		t.Fatal(err)
	}
}

// rowsHolding names every table of the database with a row whose text holds s.
func rowsHolding(t *testing.T, db *pgx.Conn, s string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT format('%I.%I', table_schema, table_name) FROM information_schema.tables
		WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, table := range tables {
		if n := countRows(t, db, fmt.Sprintf(`SELECT count(*) FROM %s r WHERE strpos(r::text, $1) > 0`, table), s); n > 0 {
			out = append(out, table)
		}
	}
	return out
}

func countRows(t *testing.T, db *pgx.Conn, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestURLSettingsNeverEchoTheirValue sets each secret setting of the table (a URL, which may
// carry a password or a token, or a key, a token or a password itself) to values that hold a
// secret, for every command that reads it: a URL that is not valid for its setting is
// refused, any refusal names the setting, and none repeats the value.
func TestURLSettingsNeverEchoTheirValue(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://settle@127.0.0.1:1/settle", "SETTLE_MCP_TOKEN": "t"}
	httpBad := []string{"ftp://user:SECRET@hooks.example.com/x", "http://hooks.example.com:SECRET/x",
		"https:///services/SECRET", "SECRET", "hooks.example.com/services/SECRET", "http://[SECRET/x"}
	// Keys, tokens and passwords: most are taken as given, and those that are checked are
	// refused without being repeated.
	keyOdd := []string{"SECRET", "SECRET with spaces", "SECRET\n", "S", "SECRET\x00"}
	cases := map[string][]string{
		"DATABASE_URL":             {"postgres://settle:SECRET@127.0.0.1:bad/settle", "SECRET", "postgres://settle@127.0.0.1/settle?sslmode=SECRET"},
		"SETTLE_SMTP_URL":          {"smtp://settle:SECRET@mail.example.com:587", "SECRET://settle:p@mail.example.com?from=a@example.com", "smtp://settle:p@mail.example.com?from=SECRET", "smtp://settle:p@mail.example.com?from=a@example.com,SECRET@example.com", "smtp://settle:SECRET@mail.example.com:bad?from=a@example.com", "smtp:///SECRET?from=a@example.com"},
		"SETTLE_OIDC_ISSUER":       append([]string{"http://idp.example.com/SECRET"}, httpBad...),
		"SETTLE_OIDC_REDIRECT_URL": append([]string{"https://settle.example.com/SECRET", "https://settle.example.com/auth/callback?SECRET"}, httpBad...),
	}
	for _, s := range readByTheTable() {
		if !s.Secret {
			continue
		}
		values, mustRefuse := cases[s.Name], true
		switch {
		case values != nil:
		case strings.Contains(s.Parses, "URL"):
			values = httpBad
		default:
			values, mustRefuse = keyOdd, false
		}
		for _, cmd := range expand(s.Commands) {
			for _, v := range values {
				vars := map[string]string{s.Name: v}
				for k, x := range base {
					if _, ok := vars[k]; !ok {
						vars[k] = x
					}
				}
				if strings.HasPrefix(s.Name, "SETTLE_OIDC_") {
					// The rest of a provider's registration, so the setting itself is checked.
					for _, k := range []string{"SETTLE_OIDC_ISSUER", "SETTLE_OIDC_CLIENT_ID", "SETTLE_OIDC_ROLES", "SETTLE_OIDC_REDIRECT_URL"} {
						if k != s.Name {
							vars[k] = validEnv[k]
						}
					}
				}
				_, err := LoadConfig(commandArgs[cmd], env(vars), t.TempDir())
				switch {
				case err == nil && mustRefuse:
					t.Errorf("%s: %s=%q was accepted", cmd, s.Name, v)
				case err == nil:
				case strings.Contains(strings.ToUpper(err.Error()), "SECRET"): // url.Parse lowers a scheme
					t.Errorf("%s: %s=%q: the refusal repeats the value: %v", cmd, s.Name, v, err)
				case !strings.Contains(err.Error(), s.Name):
					t.Errorf("%s: %s=%q: the refusal does not name the setting: %v", cmd, s.Name, v, err)
				}
			}
		}
	}
}

// TestNoRefusalRepeatsASecret starts from a configuration every command accepts, whose
// secret settings all hold a secret, and for each command leaves out or spoils each setting
// in turn: whatever the command refuses, its message repeats no secret value, its own or
// another setting's.
func TestNoRefusalRepeatsASecret(t *testing.T) {
	t.Parallel()
	for cmd, args := range commandArgs {
		for _, s := range readByTheTable() {
			for _, v := range []string{"", "not a valid value"} {
				vars := maps.Clone(validEnv)
				vars[s.Name] = v
				_, err := LoadConfig(args, env(vars), t.TempDir())
				if err != nil && strings.Contains(strings.ToUpper(err.Error()), "SECRET") {
					t.Errorf("%s with %s=%q: the refusal repeats a secret: %v", cmd, s.Name, v, err)
				}
			}
		}
	}
}
