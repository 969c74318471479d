package main

import "github.com/settle-dev/settle/ops/pg"

// readPooler checks the value of SETTLE_DB_POOLER, what stands between Settle and Postgres:
// "auto" (the default) probes once at start and keeps prepared statements on a direct
// connection, the pooler-safe mode behind a pooler; "transaction" skips the probe and always
// uses the pooler-safe mode, for a pooler in transaction mode that the probe might not
// recognise.
func readPooler(v string) (string, error) {
	switch v {
	case "", "auto":
		return "auto", nil
	case "transaction":
		return v, nil
	}
	return "", usagef("%s=%q is not auto or transaction", envDBPooler.Name, v)
}

// dbOptions are the options every command opens the database with.
func dbOptions(cfg Config) []pg.Option {
	if cfg.DBPooler == "transaction" {
		return nil
	}
	return []pg.Option{pg.PreparedWhenDirect()}
}
