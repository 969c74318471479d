package jobstore_test

import (
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// t0 is the clock of the jobs' tests.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
