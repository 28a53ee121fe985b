package partition_test

import (
	"bufio"
	"bytes"
	"context"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
)

// A grant costs one goroutine, its Run's: the member serves the grant (and
// hands it off) on the goroutine that runs Run, so a member's goroutines
// grow by one per partition it owns, not two. Counted over the goroutines
// labelled with this test (pprof labels pass to the goroutines a goroutine
// starts, so the member's loops and the grants they start carry it, and
// parallel tests' members do not). The count of Run goroutines is the
// check's control: it must find every grant.
func TestOneGoroutinePerGrant(t *testing.T) {
	t.Parallel()
	const parts = 16
	pool := pgtest.Pool(t)
	var running atomic.Int32
	run := func(ctx context.Context, o partition.Ownership) {
		running.Add(1)
		<-ctx.Done()
		running.Add(-1)
	}
	pprof.Do(pgtest.Context(t), pprof.Labels("test", t.Name()), func(context.Context) {
		startMember(t, pool, "worker-1", parts, run)
	})
	deadline := time.Now().Add(15 * time.Second)
	for running.Load() < parts {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d partitions running after 15s", running.Load(), parts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	serving, runs := labelledGoroutines(t, t.Name(), "partition.(*Member).serve"), labelledGoroutines(t, t.Name(), "TestOneGoroutinePerGrant.func")
	if runs != parts {
		t.Fatalf("control: %d goroutines run the test's Run; want %d, one per grant", runs, parts)
	}
	if serving != parts {
		t.Fatalf("%d goroutines serve the member's %d grants; want one each, the Run's", serving, parts)
	}
}

// labelledGoroutines counts the goroutines labelled test=name whose stack
// has a function whose name contains fn.
func labelledGoroutines(t *testing.T, name, fn string) int {
	t.Helper()
	var b bytes.Buffer
	pgtest.Must(t, pprof.Lookup("goroutine").WriteTo(&b, 1))
	label := `"test":"` + name + `"`
	n, count, labelled, has := 0, 0, false, false
	flush := func() {
		if labelled && has {
			n += count
		}
		count, labelled, has = 0, false, false
	}
	sc := bufio.NewScanner(&b)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, " @ ") && !strings.HasPrefix(line, "#"):
			flush()
			count, _ = strconv.Atoi(strings.Fields(line)[0])
		case strings.HasPrefix(line, "# labels:"):
			labelled = strings.Contains(line, label)
		case strings.HasPrefix(line, "#") && strings.Contains(line, fn):
			has = true
		}
	}
	flush()
	return n
}
