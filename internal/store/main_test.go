package store_test

import (
	"os"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
