package purgestore_test

import (
	"testing"

	"github.com/settle-dev/settle/ops/pg/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
