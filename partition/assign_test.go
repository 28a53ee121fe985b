package partition_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"

	"github.com/leasehold/leasehold/partition"
)

// Published XXH64 (seed 0) test vectors: other languages must agree.
func TestOfIsXXH64ModN(t *testing.T) {
	for _, tc := range []struct {
		key  string
		hash uint64
	}{
		{"", 0xef46db3751d8e999},
		{"a", 0xd24ec4f1a98c6e5b},
		{"asdf", 0x415872f599cea71e},
	} {
		for _, n := range []int{1, 7, 64, 1024} {
			if got, want := partition.Of([]byte(tc.key), n), int(tc.hash%uint64(n)); got != want {
				t.Errorf("Of(%q, %d) = %d; want %d", tc.key, n, got, want)
			}
			if got := partition.OfString(tc.key, n); got != partition.Of([]byte(tc.key), n) {
				t.Errorf("OfString(%q, %d) = %d; differs from Of", tc.key, n, got)
			}
		}
	}
	if partition.Of([]byte("x"), 0) != -1 {
		t.Error("Of(x, 0) must be -1")
	}
}

type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// Of is the same function the assignment's ring uses to place keys.
func TestOfMatchesTheRing(t *testing.T) {
	ring := consistent.New(nil, consistent.Config{Hasher: hasher{}, PartitionCount: 271, ReplicationFactor: 10, Load: 1.25})
	for i := range 1000 {
		key := []byte(fmt.Sprintf("customer-%d", i))
		if got, want := partition.Of(key, 271), ring.FindPartitionID(key); got != want {
			t.Fatalf("Of(%s) = %d, ring says %d", key, got, want)
		}
	}
}

func ids(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("worker-%d", i+1)
	}
	return out
}

func TestAssignIsAPureFunctionOfTheMemberSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 16, 256} {
		for _, k := range []int{1, 3, 40} {
			members := ids(k)
			want, err := partition.Assign(members, n)
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				shuffled := slices.Clone(members)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				shuffled = append(shuffled, shuffled[0]) // duplicates do not matter either
				got, err := partition.Assign(shuffled, n)
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("n=%d k=%d: assignment depends on member order", n, k)
				}
			}
		}
	}
}

func TestAssignBoundsLoadAndHandlesDegenerateCases(t *testing.T) {
	for _, n := range []int{1, 2, 16, 64, 256, 1024} {
		for _, k := range []int{1, 2, 3, 7, 40, 64, 100} {
			owners, err := partition.Assign(ids(k), n)
			if err != nil {
				t.Fatalf("n=%d k=%d: %v", n, k, err)
			}
			load := map[string]int{}
			for p, o := range owners {
				if !slices.Contains(ids(k), o) {
					t.Fatalf("n=%d k=%d: partition %d owned by %q, not a member", n, k, p, o)
				}
				load[o]++
			}
			limit := int(math.Ceil(float64(n) / float64(k) * partition.Load))
			for o, l := range load {
				if l > limit {
					t.Fatalf("n=%d k=%d: %s owns %d partitions, bound is %d", n, k, o, l, limit)
				}
			}
		}
	}
	owners, err := partition.Assign(nil, 4)
	if err != nil || !slices.Equal(owners, []string{"", "", "", ""}) {
		t.Fatalf("Assign(no members) = %v, %v; want all unowned", owners, err)
	}
	if _, err := partition.Assign(ids(2), 0); err == nil {
		t.Fatal("Assign(n=0) must fail")
	}
}

// A join moves about the ideal share of partitions, 1/(k+1), not a reshuffle.
// (docs/partitions.md has the measured ratios.)
func TestAssignMovesLittleOnJoin(t *testing.T) {
	for _, n := range []int{64, 256, 1024} {
		for _, k := range []int{2, 8, 32} {
			before, _ := partition.Assign(ids(k), n)
			after, _ := partition.Assign(ids(k+1), n)
			moved := 0
			for p := range before {
				if before[p] != after[p] {
					moved++
				}
			}
			ideal := float64(n) / float64(k+1)
			if float64(moved) > 3*ideal {
				t.Errorf("n=%d k=%d→%d: %d partitions moved, ideal %.1f", n, k, k+1, moved, ideal)
			}
		}
	}
}
