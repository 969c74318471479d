package pg_test

import (
	"context"
	"testing"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

func TestSchemaIsCurrentAfterMigrate(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	cur, latest, err := db.SchemaStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cur != latest || latest < 1 {
		t.Fatalf("schema at %d, latest %d", cur, latest)
	}
	if err := db.CheckSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
}
