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

func TestHello(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, pgtest.DB(t), &out); err != nil {
		t.Fatal(err)
	}
	const want = "hello, Ada\nhello, Grace\nhello, Barbara\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
