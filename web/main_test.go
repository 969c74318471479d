package web_test

import (
	"testing"

	"github.com/settle-dev/settle/internal/testworld"
)

func TestMain(m *testing.M) { testworld.Main(m) }
