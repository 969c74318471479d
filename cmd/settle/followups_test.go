package main

import (
	"strings"
	"testing"
)

func TestNotifierSettings(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"DATABASE_URL": "postgres://settle@localhost/settle",
		"SETTLE_NOTIFY_WEBHOOK_URL": "https://hooks.example.com/T1/B2",
		"SETTLE_SMTP_URL":           "smtp://settle:s3cret@mail.example.com?from=settle@example.com"}
	cfg, err := LoadConfig([]string{"serve"}, env(vars), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Notify.SMTP; cfg.Notify.WebhookURL != vars["SETTLE_NOTIFY_WEBHOOK_URL"] || s == nil ||
		s.Addr != "mail.example.com:587" || s.User != "settle" || s.Password != "s3cret" || s.From != "settle@example.com" || s.ImplicitTLS {
		t.Fatalf("notify config %+v, smtp %+v", cfg.Notify, cfg.Notify.SMTP)
	}
	for name, bad := range map[string]map[string]string{
		"webhook not http":  {"SETTLE_NOTIFY_WEBHOOK_URL": "hooks.example.com/T1"},
		"smtp without from": {"SETTLE_SMTP_URL": "smtp://settle:s3cret@mail.example.com:587"},
		"smtp scheme":       {"SETTLE_SMTP_URL": "imap://settle:s3cret@mail.example.com?from=a@example.com"},
		"smtp not a URL":    {"SETTLE_SMTP_URL": "smtp://settle:s3cret@mail.example.com:bad port?from=a@example.com"},
	} {
		v := map[string]string{"DATABASE_URL": vars["DATABASE_URL"]}
		for k, x := range bad {
			v[k] = x
		}
		code, _, stderr := run(t, []string{"serve"}, v, "")
		if code != 2 || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "s3cret") {
			t.Errorf("%s: exit %d, %q; want 2 and one line that does not quote the password", name, code, stderr)
		}
	}
}
