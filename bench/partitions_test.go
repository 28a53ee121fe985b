package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/assign"
	"github.com/leasehold/leasehold/internal/pgcluster"
	"github.com/leasehold/leasehold/partition"
)

// TestPartitionsSuite runs the movement and sweep parts on few id sets and
// one graceful leave and join of 2 members and 4 partitions on a real
// server, and checks the Markdown tables and the JSON report.
func TestPartitionsSuite(t *testing.T) {
	t.Parallel() // a throwaway server of its own; checks the report's shape, not its speed
	if os.Getenv(envURL) == "" {
		if _, err := pgcluster.FindBinDir(); errors.Is(err, pgcluster.ErrNotInstalled) {
			t.Skip(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "partitions.json")
	var out bytes.Buffer
	err := runPartitions(ctx, []string{"--parts", "movement,sweep,handoff", "--sets", "2", "--sweep-sets", "0",
		"--members", "2", "--partitions", "4", "--rounds", "1", "--markdown", "--json", path}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Machine: nproc", "PostgreSQL 1", "| n | k |", "| replication | load |", "| graceful leave | 2 -> 1 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Markdown output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep partitionsReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, b)
	}
	if rep.Suite != "partitions" || rep.Rounds != 1 {
		t.Errorf("suite %q rounds %d, want partitions 1", rep.Suite, rep.Rounds)
	}
	count := map[string]int{}
	for _, r := range rep.Results {
		count[r.Case]++
		switch r.Case {
		case "join", "leave":
			if r.Samples != 3 || r.MovedOverIdealMean <= 0 || r.MovedOverIdealMax < r.MovedOverIdealMean ||
				r.MaxOverAvgLoadMax < 1 || r.System != current.String() {
				t.Errorf("implausible movement row %+v", r)
			}
		case "sweep":
			if r.MovedOverIdealMean <= 0 || r.MaxOverAvgLoadMax < 1 || r.AssignMicros <= 0 {
				t.Errorf("implausible sweep row %+v", r)
			}
		case "graceful leave", "graceful join":
			if r.Samples != 1 || r.P50Ms <= 0 || r.MaxMs < r.P50Ms || r.Partitions != 4 {
				t.Errorf("implausible timing row %+v", r)
			}
		default:
			t.Errorf("unexpected case %q", r.Case)
		}
	}
	cells := len(moveN) * len(moveK)
	want := map[string]int{"join": cells, "leave": cells, "sweep": len(sweepParams()), "graceful leave": 1, "graceful join": 1}
	for c, n := range want {
		if count[c] != n {
			t.Errorf("%d %q rows, want %d", count[c], c, n)
		}
	}
}

// The movement part measures the assignment package partition uses.
func TestMovementUsesPartitionAssign(t *testing.T) {
	for _, s := range memberSets(7, 8, 2) {
		for _, n := range []int{16, 256} {
			got, err := assign.Owners(s.ids, n, current.rf, current.load)
			if err != nil {
				t.Fatal(err)
			}
			want, err := partition.Assign(s.ids, n)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("assign.Owners with (%d, %g) differs from partition.Assign (%v)", current.rf, current.load, err)
			}
		}
	}
	if m := moved([]string{"a", "b", "c"}, []string{"a", "c", "c"}); m != 1 {
		t.Errorf("moved = %d, want 1", m)
	}
	if l := maxLoad([]string{"a", "b", "b"}); l != 2 {
		t.Errorf("maxLoad = %v, want 2", l)
	}
}

func TestPartitionsFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--parts", "movement,nope"},
		{"--members", "1"},
		{"--load-members", "1,x"},
		{"--ttl", "500ms"},
	} {
		if _, err := parsePartitionsFlags(args, io.Discard); err == nil {
			t.Errorf("parsePartitionsFlags(%q) succeeded", args)
		}
	}
	f, err := parsePartitionsFlags([]string{"--parts", "load,movement"}, io.Discard)
	if err != nil || !slices.Equal(f.parts, []string{"movement", "load"}) || !f.needsDB() {
		t.Errorf("parts %v, %v; want movement,load in canonical order", f.parts, err)
	}
}

// The deploy sampler counts a partition's unowned time from the samples
// (half an interval where it changed inside it, all of it where it stayed
// unheld) and its grants from token changes; a partition held throughout
// counts nothing.
func TestDeploySamplerCountsUnownedTimeAndGrants(t *testing.T) {
	s := newDeploySampler(nil, "g")
	t0 := time.Now()
	status := func(held0, held1 bool, tok0, tok1 int64) partition.Status {
		return partition.Status{Partitions: []partition.PartitionStatus{
			{Partition: 0, Held: held0, Token: fence.Token(tok0)},
			{Partition: 1, Held: held1, Token: fence.Token(tok1)},
		}}
	}
	s.take(status(true, true, 1, 5), t0)
	s.take(status(false, true, 1, 5), t0.Add(10*time.Millisecond)) // 0 released: half of 10 ms
	s.take(status(false, true, 1, 5), t0.Add(20*time.Millisecond)) // all of 10 ms
	s.take(status(true, true, 2, 5), t0.Add(30*time.Millisecond))  // granted: half of 10 ms, a grant
	r := s.result()
	if len(r.unowned) != 1 || r.unowned[0] != 20*time.Millisecond {
		t.Fatalf("unowned = %v; want one partition, 20ms", r.unowned)
	}
	if r.grants != 1 {
		t.Fatalf("grants = %d; want 1", r.grants)
	}
}
