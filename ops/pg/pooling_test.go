package pg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// Statements are sent in a mode a pooler in transaction mode allows, unless the connection
// string chooses one.
func TestOpenChoosesAPoolerSafeExecMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(pgtest.NewDatabase(t))
	for _, c := range []struct {
		url  string
		want pgx.QueryExecMode
	}{
		{url, pgx.QueryExecModeCacheDescribe},
		{url + "&default_query_exec_mode=cache_statement", pgx.QueryExecModeCacheStatement},
		{url + "&default_query_exec_mode=exec", pgx.QueryExecModeExec},
	} {
		db, err := pg.Open(ctx, c.url)
		if err != nil {
			t.Fatal(err)
		}
		got := db.Pool.Config().ConnConfig.DefaultQueryExecMode
		if err := db.Ping(ctx); err != nil || got != c.want {
			t.Errorf("%s: mode %v (%v), want %v", c.url, got, err, c.want)
		}
		db.Close()
	}
}
