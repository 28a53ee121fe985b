package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// Every event is applied once; every third event's first delivery lost its
// answer, so it was delivered again and recognised.
func TestWebhook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, pgtest.DB(t), &out, 30); err != nil {
		t.Fatal(err)
	}
	const want = "30 events applied once each; 40 deliveries, 10 repeated deliveries recognised by their idempotency key\n"
	if out.String() != want {
		t.Fatalf("output %q\nwant %q", out.String(), want)
	}
}
