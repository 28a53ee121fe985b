package outbox_test

import (
	"os"
	"testing"

	"github.com/leasehold/leasehold/leaseholdtest"
)

func TestMain(m *testing.M) { os.Exit(leaseholdtest.Run(m)) }
