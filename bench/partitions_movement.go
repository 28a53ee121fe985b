package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/assign"
	"github.com/leasehold/leasehold/partition"
)

// The grids of the movement part and of the tuning sweep.
var (
	moveN     = []int{64, 256, 1024}
	moveK     = []int{2, 4, 8, 16, 32, 64}
	sweepRF   = []int{20, 40, 80, 160, 320}
	sweepLoad = []float64{1.1, 1.25, 1.5}
)

// assignParams is one choice of the consistent-hashing constants.
type assignParams struct {
	rf   int
	load float64
}

func (p assignParams) String() string { return fmt.Sprintf("assign(%d,%g)", p.rf, p.load) }

// current is the pair package partition uses.
var current = assignParams{partition.ReplicationFactor, partition.Load}

// idSet is k+1 member ids: the first k are the members before a join and
// the last one joins; for a leave, all k+1 are members and ids[leaver]
// leaves.
type idSet struct {
	ids    []string
	leaver int
}

// memberSets returns the id sets for k members: worker-1..worker-k+1 first,
// then random sets of ids shaped like lease.DefaultOwner's, seeded by seed
// and k so that every (n, parameters) sees the same sets.
func memberSets(seed uint64, k, random int) []idSet {
	rng := rand.New(rand.NewPCG(seed, uint64(k)))
	workers := make([]string, k+1)
	for i := range workers {
		workers[i] = fmt.Sprintf("worker-%d", i+1)
	}
	sets := []idSet{{ids: workers, leaver: rng.IntN(k + 1)}}
	for range random {
		ids := make([]string, k+1)
		for i := range ids {
			ids[i] = fmt.Sprintf("host-%08x-%d", rng.Uint32(), 1000+rng.IntN(64000))
		}
		sets = append(sets, idSet{ids: ids, leaver: rng.IntN(k + 1)})
	}
	return sets
}

// stat accumulates a mean and a maximum.
type stat struct {
	sum, max float64
	n        int
}

func (s *stat) add(x float64) {
	s.sum += x
	s.max = max(s.max, x)
	s.n++
}

func (s *stat) merge(t stat) {
	s.sum += t.sum
	s.max = max(s.max, t.max)
	s.n += t.n
}

func (s stat) mean() float64 {
	if s.n == 0 {
		return 0
	}
	return s.sum / float64(s.n)
}

// moveStats is the outcome of joins and leaves at one (n, k, parameters):
// moved/ideal and max/avg load after the change, over the id sets.
type moveStats struct {
	n, k                int
	join, leave         stat    // partitions moved / (n/(k+1))
	joinLoad, leaveLoad stat    // largest member's partitions / (n/members) after the change
	assignMicros        float64 // median time of one assignment of n to k+1 members, if timed
}

// assignReps is how many times timeAssign computes an assignment.
const assignReps = 5

// timeAssign returns the median time, in µs, of computing the assignment of
// n partitions to ids with p, over assignReps runs on one goroutine.
func timeAssign(p assignParams, n int, ids []string) (float64, error) {
	runtime.GC()
	var xs []float64
	for range assignReps {
		t0 := time.Now()
		if _, err := assign.Owners(ids, n, p.rf, p.load); err != nil {
			return 0, err
		}
		xs = append(xs, float64(time.Since(t0))/float64(time.Microsecond))
	}
	return median(xs), nil
}

// measureMoves computes, for every id set, the assignment of n partitions
// before and after a join (k -> k+1) and a leave (k+1 -> k).
func measureMoves(p assignParams, n, k int, sets []idSet) (moveStats, error) {
	ms := moveStats{n: n, k: k}
	owners := func(ids []string) ([]string, error) { return assign.Owners(ids, n, p.rf, p.load) }
	ideal := float64(n) / float64(k+1)
	for _, s := range sets {
		small, err := owners(s.ids[:k])
		if err != nil {
			return ms, err
		}
		all, err := owners(s.ids)
		if err != nil {
			return ms, err
		}
		left := slices.Delete(slices.Clone(s.ids), s.leaver, s.leaver+1)
		after, err := owners(left)
		if err != nil {
			return ms, err
		}
		ms.join.add(float64(moved(small, all)) / ideal)
		ms.joinLoad.add(maxLoad(all) / (float64(n) / float64(k+1)))
		ms.leave.add(float64(moved(all, after)) / ideal)
		ms.leaveLoad.add(maxLoad(after) / (float64(n) / float64(k)))
	}
	return ms, nil
}

// moved counts the partitions whose owner differs.
func moved(before, after []string) int {
	c := 0
	for p := range before {
		if before[p] != after[p] {
			c++
		}
	}
	return c
}

// maxLoad returns the largest number of partitions one member owns.
func maxLoad(owners []string) float64 {
	count := map[string]int{}
	top := 0
	for _, o := range owners {
		count[o]++
		top = max(top, count[o])
	}
	return float64(top)
}

// movementResult holds the movement grid, in grid order, of every
// parameter pair computed.
type movementResult struct {
	sets  int // id sets per (n, k), worker-1..k included
	grids map[assignParams][]moveStats
}

// runMovement computes the movement grid of every pair in params over the
// worker set and random random sets, (pair, n, k) cells in parallel over
// the CPUs. Then, alone on one goroutine, it times the assignment of the
// cells timed selects (to worker-1..k+1).
func runMovement(seed uint64, random int, params []assignParams, timed func(n, k int) bool) (movementResult, error) {
	sets := map[int][]idSet{}
	for _, k := range moveK {
		sets[k] = memberSets(seed, k, random)
	}
	type cell struct {
		p    assignParams
		i    int // index in the grid
		n, k int
	}
	res := movementResult{sets: random + 1, grids: map[assignParams][]moveStats{}}
	var cells []cell
	for _, p := range params {
		res.grids[p] = make([]moveStats, len(moveN)*len(moveK))
		for i, n := range moveN {
			for j, k := range moveK {
				cells = append(cells, cell{p, i*len(moveK) + j, n, k})
			}
		}
	}
	// The largest k first: they take longest (building the ring is
	// quadratic in k), so the CPUs finish together.
	slices.SortStableFunc(cells, func(a, b cell) int { return b.k - a.k })
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	work := make(chan cell)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for c := range work {
				ms, err := measureMoves(c.p, c.n, c.k, sets[c.k])
				mu.Lock()
				if err != nil {
					firstErr = cmpOr(firstErr, fmt.Errorf("%v n=%d k=%d: %w", c.p, c.n, c.k, err))
				}
				res.grids[c.p][c.i] = ms
				mu.Unlock()
			}
		})
	}
	for _, c := range cells {
		work <- c
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return res, firstErr
	}
	for _, p := range params {
		for i := range res.grids[p] {
			ms := &res.grids[p][i]
			if !timed(ms.n, ms.k) {
				continue
			}
			var err error
			if ms.assignMicros, err = timeAssign(p, ms.n, sets[ms.k][0].ids); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// everyCell times every cell; largestCell only the largest n and k.
func everyCell(n, k int) bool { return true }

func largestCell(n, k int) bool { return n == moveN[len(moveN)-1] && k == moveK[len(moveK)-1] }

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// sweepParams returns every pair of the tuning sweep.
func sweepParams() []assignParams {
	var out []assignParams
	for _, rf := range sweepRF {
		for _, l := range sweepLoad {
			out = append(out, assignParams{rf, l})
		}
	}
	return out
}

// movementTable renders the current constants' grid and its JSON rows.
func movementTable(mr movementResult) (ptable, []partitionsRow) {
	t := ptable{
		title: fmt.Sprintf("Movement and balance, ReplicationFactor %d, Load %g", current.rf, current.load),
		notes: []string{fmt.Sprintf("%d member-id sets per row (worker-1..k and %d random host-<hex>-<pid> sets); "+
			"join k -> k+1, leave k+1 -> k (a random member); ideal = n/(k+1) partitions moved; "+
			"max/avg = largest member's partitions over n/members after the change; "+
			"assign µs = median time of computing one assignment (internal/assign.Owners) of n partitions "+
			"to worker-1..k+1, on one goroutine.", mr.sets, mr.sets-1)},
		header: []string{"n", "k", "join moved/ideal mean", "max", "leave moved/ideal mean", "max",
			"max/avg load after join (worst)", "after leave (worst)", "assign µs"},
	}
	var rows []partitionsRow
	for _, ms := range mr.grids[current] {
		t.add(fmt.Sprint(ms.n), fmt.Sprint(ms.k), f2(ms.join.mean()), f2(ms.join.max), f2(ms.leave.mean()), f2(ms.leave.max),
			f2(ms.joinLoad.max), f2(ms.leaveLoad.max), f0(ms.assignMicros))
		for _, c := range []struct {
			name       string
			move, load stat
		}{{"join", ms.join, ms.joinLoad}, {"leave", ms.leave, ms.leaveLoad}} {
			rows = append(rows, partitionsRow{
				System: current.String(), Case: c.name, Partitions: ms.n, Members: ms.k,
				ReplicationFactor: current.rf, Load: current.load, Samples: c.move.n,
				MovedOverIdealMean: c.move.mean(), MovedOverIdealMax: c.move.max,
				MaxOverAvgLoadMean: c.load.mean(), MaxOverAvgLoadMax: c.load.max,
			})
		}
	}
	return t, rows
}

// denseRatio is the partitions per member from which the sweep reports
// balance separately: below it the bound ceil(Load*n/k) is dominated by
// rounding (at n = k it allows 2 partitions where the average is 1).
const denseRatio = 16

// sweepSummary aggregates one pair's grid over every (n, k).
type sweepSummary struct {
	p                 assignParams
	join, leave, load stat
	loadDense         stat    // max/avg load where n/k >= denseRatio
	assign            float64 // median µs of one assignment at the largest n and k
}

func summarize(p assignParams, grid []moveStats) sweepSummary {
	s := sweepSummary{p: p}
	for _, ms := range grid {
		s.join.merge(ms.join)
		s.leave.merge(ms.leave)
		s.load.merge(ms.joinLoad)
		s.load.merge(ms.leaveLoad)
		if ms.n/ms.k >= denseRatio {
			s.loadDense.merge(ms.joinLoad)
			s.loadDense.merge(ms.leaveLoad)
		}
		if largestCell(ms.n, ms.k) {
			s.assign = ms.assignMicros
		}
	}
	return s
}

// sweepTable renders the tuning sweep and its JSON rows.
func sweepTable(mr movementResult) (ptable, []partitionsRow) {
	nMax, kMax := moveN[len(moveN)-1], moveK[len(moveK)-1]
	t := ptable{
		title: "Tuning sweep: ReplicationFactor x Load over every (n, k) above",
		notes: []string{fmt.Sprintf("moved/ideal over all joins and leaves of n in %v, k in %v, %d id sets each; "+
			"max/avg load after every change; assign µs = median time of computing one assignment of n=%d "+
			"partitions to %d members. * = the constants in use.", moveN, moveK, mr.sets, nMax, kMax+1)},
		header: []string{"replication", "load", "join moved/ideal mean", "leave mean", "worst moved/ideal",
			"max/avg load mean", "worst", fmt.Sprintf("worst at n/k >= %d", denseRatio), "assign µs"},
	}
	var rows []partitionsRow
	for _, p := range sweepParams() {
		grid, ok := mr.grids[p]
		if !ok {
			continue
		}
		s := summarize(p, grid)
		worst := max(s.join.max, s.leave.max)
		mark := ""
		if p == current {
			mark = "*"
		}
		t.add(fmt.Sprint(p.rf)+mark, fmt.Sprint(p.load)+mark, f2(s.join.mean()), f2(s.leave.mean()), f2(worst),
			f2(s.load.mean()), f2(s.load.max), f2(s.loadDense.max), f0(s.assign))
		rows = append(rows, partitionsRow{
			System: p.String(), Case: "sweep", ReplicationFactor: p.rf, Load: p.load, Samples: s.join.n + s.leave.n,
			JoinMovedOverIdealMean: s.join.mean(), LeaveMovedOverIdealMean: s.leave.mean(),
			MovedOverIdealMean: (s.join.sum + s.leave.sum) / float64(s.join.n+s.leave.n), MovedOverIdealMax: worst,
			MaxOverAvgLoadMean: s.load.mean(), MaxOverAvgLoadMax: s.load.max,
			AssignMicros: s.assign,
		})
	}
	return t, rows
}
