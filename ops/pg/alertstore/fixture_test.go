package alertstore_test

import (
	"testing"

	"github.com/settle-dev/settle/ops/pg/alertstore"
	"github.com/settle-dev/settle/ops/pg/pgtest/pgworld"
)

var t0 = pgworld.T0

// fixture is the stores' test world with the alerts' store on its database.
type fixture struct {
	*pgworld.World
	alerts *alertstore.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	w := pgworld.New(t)
	return &fixture{World: w, alerts: alertstore.New(w.DB)}
}
