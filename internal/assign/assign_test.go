package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

type libHasher struct{}

func (libHasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

type libMember string

func (m libMember) String() string { return string(m) }

// library is the assignment of github.com/buraksezer/consistent v1.0.0, the
// one Owners must reproduce exactly.
func library(members []string, n, rf int, load float64) []string {
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	owners := make([]string, n)
	if len(ids) == 0 {
		return owners
	}
	ms := make([]consistent.Member, len(ids))
	for i, id := range ids {
		ms[i] = libMember(id)
	}
	ring := consistent.New(ms, consistent.Config{Hasher: libHasher{}, PartitionCount: n, ReplicationFactor: rf, Load: load})
	for p := range owners {
		owners[p] = ring.GetPartitionOwner(p).String()
	}
	return owners
}

// memberSet is k member ids in one of the shapes deployments use.
func memberSet(r *rand.Rand, k int) []string {
	ids := make([]string, k)
	shape := r.IntN(3)
	for i := range ids {
		switch shape {
		case 0:
			ids[i] = fmt.Sprintf("worker-%d", i+1)
		case 1:
			ids[i] = fmt.Sprintf("host-%08x-%d", r.Uint32(), r.IntN(1<<16))
		default:
			ids[i] = fmt.Sprintf("%x", r.Uint64())
		}
	}
	return ids
}

// Owners computes exactly the library's assignment, over member sets of
// every shape and size, partition counts and parameters (members of two
// versions then agree on every owner during a rolling upgrade). The check
// can fail: a negative control with one member id changed must differ.
func TestOwnersMatchTheLibrary(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := 0
	for _, n := range []int{1, 7, 64, 256, 1024} {
		for _, k := range []int{1, 2, 3, 8, 17, 64, 100} {
			for _, p := range []struct {
				rf   int
				load float64
			}{{160, 1.25}, {20, 1.1}, {40, 1.5}, {1, 1.25}} {
				if testing.Short() && k*p.rf > 4000 {
					continue
				}
				ids := memberSet(r, k)
				got, err := Owners(ids, n, p.rf, p.load)
				if err != nil {
					t.Fatalf("n %d, k %d, %+v: %v", n, k, p, err)
				}
				if want := library(ids, n, p.rf, p.load); !slices.Equal(got, want) {
					t.Fatalf("n %d, %d members %v..., %+v: differs from the library", n, k, ids[:1], p)
				}
				cases++
			}
		}
	}
	ids := memberSet(r, 8)
	got, _ := Owners(ids, 256, 160, 1.25)
	ids[3] += "-other"
	if slices.Equal(got, library(ids, 256, 160, 1.25)) {
		t.Fatal("control: a changed member set gave the same assignment; the comparison cannot fail")
	}
	t.Logf("%d cases equal", cases)
}

// The order of the members and duplicates do not matter.
func TestOwnersDependOnTheSetOnly(t *testing.T) {
	ids := memberSet(rand.New(rand.NewPCG(3, 4)), 20)
	a, _ := Owners(ids, 512, 160, 1.25)
	shuffled := append(slices.Clone(ids), ids[0], ids[5])
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b, _ := Owners(shuffled, 512, 160, 1.25)
	if !slices.Equal(a, b) {
		t.Fatal("a shuffled member list with duplicates changed the assignment")
	}
}

func TestOwnersRejectsInvalidParameters(t *testing.T) {
	for _, c := range []struct {
		n, rf int
		load  float64
	}{{0, 160, 1.25}, {8, 0, 1.25}, {8, 160, 1}} {
		if _, err := Owners([]string{"a"}, c.n, c.rf, c.load); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// BenchmarkOwners is the assignment's cost at 1,024 partitions (issue 26:
// under 5 ms at 64 members).
func BenchmarkOwners(b *testing.B) {
	for _, k := range []int{64, 128, 256} {
		ids := memberSet(rand.New(rand.NewPCG(7, 8)), k)
		b.Run(fmt.Sprint(k, "members"), func(b *testing.B) {
			for b.Loop() {
				if _, err := Owners(ids, 1024, 160, 1.25); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
