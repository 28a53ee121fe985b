package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"
)

func init() {
	register(suite{
		name:    "partitions",
		summary: "partition assignment movement and balance, handoff and failover times, database load per member",
		run:     runPartitions,
	})
}

// runPartitions runs the selected parts of the partitions suite: movement
// and sweep are pure computation; handoff, crash and load run in-process
// members on PostgreSQL.
func runPartitions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parsePartitionsFlags(args, stderr)
	if err != nil {
		return err
	}
	began := time.Now()
	rep := partitionsReport{Suite: "partitions", Rounds: f.rounds, Ratios: map[string]float64{}}
	var tables []ptable
	addTable := func(t ptable, rows []partitionsRow) {
		tables = append(tables, t)
		rep.Results = append(rep.Results, rows...)
	}

	if f.has("movement") {
		mr, err := timedMovement(stderr, f.seed, f.sets, []assignParams{current}, everyCell)
		if err != nil {
			return err
		}
		addTable(movementTable(mr))
	}
	if f.has("sweep") {
		mr, err := timedMovement(stderr, f.seed, f.sweepSets, sweepParams(), largestCell)
		if err != nil {
			return err
		}
		addTable(sweepTable(mr))
	}

	pgVersion := "not used"
	if f.needsDB() {
		env, cleanup, err := openPartitionsEnv(ctx, f.pgbouncer, !f.nonDurable, stderr)
		if err != nil {
			return err
		}
		defer cleanup()
		pgVersion = env.version
		fmt.Fprintf(stderr, "partitions: PostgreSQL %s (%s), database %s\n", env.version, env.where, env.dbName)
		rng := rand.New(rand.NewPCG(f.seed, 0x9e3779b97f4a7c15))
		var cases []timing
		if f.has("handoff") {
			leave, join, err := runHandoff(ctx, env, f, rng)
			if err != nil {
				return fmt.Errorf("handoff: %w", err)
			}
			cases = append(cases, leave, join)
		}
		if f.has("crash") {
			crash, err := runCrash(ctx, env, f, rng)
			if err != nil {
				return fmt.Errorf("crash: %w", err)
			}
			cases = append(cases, crash)
		}
		if f.has("deploy") {
			rs, err := runDeploy(ctx, env, f)
			if err != nil {
				return fmt.Errorf("deploy: %w", err)
			}
			addTable(deployTable(f, rs))
		}
		if len(cases) > 0 {
			addTable(timingTable(f, cases))
			if len(cases) == 3 {
				rep.Ratios["crash_p50_over_leave_p50"] = ms(quantileOf(cases[2].samples, 0.5)) / ms(quantileOf(cases[0].samples, 0.5))
			}
		}
		if f.has("load") {
			var rs []loadResult
			for _, k := range f.loadMembers {
				for _, n := range f.loadParts {
					r, err := runLoad(ctx, env, f, k, n)
					if err != nil {
						return fmt.Errorf("load k=%d n=%d: %w", k, n, err)
					}
					rs = append(rs, r)
				}
			}
			addTable(loadTable(f, rs))
			loadRatios(rep.Ratios, rs)
		}
	}

	printTables(stdout, "partitions", machineLine(pgVersion, f.settings(), began), f.markdown, tables)
	if f.jsonPath != "" {
		if err := writeJSON(f.jsonPath, rep); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "partitions suite: done in %v\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// timedMovement runs runMovement with progress on stderr.
func timedMovement(stderr io.Writer, seed uint64, random int, params []assignParams, timed func(n, k int) bool) (movementResult, error) {
	fmt.Fprintf(stderr, "partitions: movement of %d parameter pair(s) over %d id sets per (n, k)\n", len(params), random+1)
	t0 := time.Now()
	mr, err := runMovement(seed, random, params, timed)
	fmt.Fprintf(stderr, "partitions: computed in %v\n", time.Since(t0).Round(time.Millisecond))
	return mr, err
}

// settings describes the run's settings for the report's machine line.
func (f partitionsFlags) settings() string {
	s := fmt.Sprintf("--parts %s, seed %d", strings.Join(f.parts, ","), f.seed)
	if f.has("movement") {
		s += fmt.Sprintf(", %d id sets per (n, k) in movement", f.sets+1)
	}
	if f.has("sweep") {
		s += fmt.Sprintf(", %d in sweep", f.sweepSets+1)
	}
	if f.needsDB() {
		s += fmt.Sprintf(", TTL %v, PollInterval 1s (default)", f.ttl)
	}
	if f.has("handoff") || f.has("crash") {
		s += fmt.Sprintf(", %d partitions and %d members, %d graceful rounds, %d crashes", f.partitions, f.members, f.rounds, f.crashRounds)
	}
	if f.has("load") {
		s += fmt.Sprintf(", load window %v after %v", f.loadWindow, f.loadSettle)
	}
	return s
}

// loadRatios records, per member count, the statements per member at the
// largest partition count over those at the smallest: 1.0 means flat.
func loadRatios(ratios map[string]float64, rs []loadResult) {
	lo, hi := map[int]loadResult{}, map[int]loadResult{}
	for _, r := range rs {
		if l, ok := lo[r.k]; !ok || r.n < l.n {
			lo[r.k] = r
		}
		if h, ok := hi[r.k]; !ok || r.n > h.n {
			hi[r.k] = r
		}
	}
	for k, l := range lo {
		h := hi[k]
		if h.n == l.n || l.xactsPerMember() == 0 {
			continue
		}
		ratios[fmt.Sprintf("xacts_per_member_n%d_over_n%d_k%d", h.n, l.n, k)] = h.xactsPerMember() / l.xactsPerMember()
	}
}
