package fence_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/fence"
)

func TestUnfencedIsLoud(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ran := false
	err := fence.Unfenced(context.Background(), log, "s3://bucket/report.csv", 42, "object store has no conditional writes here",
		func(context.Context) error { ran = true; return nil })
	if err != nil || !ran {
		t.Fatalf("Unfenced = %v, ran %v", err, ran)
	}
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "UNFENCED") ||
		!strings.Contains(out, "token=42") || !strings.Contains(out, "report.csv") {
		t.Fatalf("log = %q; want a warning naming the resource and token", out)
	}
}
