package web_test

import (
	"testing"

	"github.com/dataloader/dataloader/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
