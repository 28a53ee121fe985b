package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func init() {
	register(suite{
		name: "kafka",
		summary: "kafka consuming a topic into PostgreSQL (no-op and one-row handlers) against plain franz-go " +
			"and the same SQL raw; grant-to-first-record latency; the outbox relay against bare transactional producers",
		run: runKafka,
	})
}

// The kafka suite's systems.
const (
	sysFranz        = "franz-go"         // plain consumption, no database
	sysKafkaLH      = "leasehold"        // kafka, FetchMaxWait 100ms (default)
	sysKafkaLHWait5 = "leasehold-wait5s" // kafka with franz-go's default FetchMaxWait (handoff case)
	sysKafkaRaw     = "raw-sql"          // a franz-go client per partition, the consumer's statements sent raw
)

// kafkaBench is one run of the kafka suite.
type kafkaBench struct {
	f       kafkaFlags
	brokers []string
	topic   string
	ends    map[int32]int64 // log end per partition
	ctl     *pgxpool.Pool
	lh, raw *pgxpool.Pool // the systems' pools: same size
	sql     kafkaSQL
	seq     int
	stderr  io.Writer

	dbName     string         // the bench database
	stats      *pgxpool.Pool  // one connection to the server's postgres database: pg_stat_statements
	statements bool           // pg_stat_statements is loaded
	server     ServerSettings // the server's durability settings
	ob         *outboxBench   // the outbox cases' state
	postmaster int            // the server's postmaster pid, for its CPU time (0: not on this machine)
}

func runKafka(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseKafkaFlags(args, stderr)
	if err != nil {
		return err
	}
	began := time.Now()
	b, version, where, cleanup, err := openKafkaBench(ctx, f, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(stderr, "kafka suite: PostgreSQL %s, %s; %s\n", version, where, f.settings())

	systems := map[string][]string{
		"noop":            {sysFranz, sysKafkaLH, sysKafkaRaw},
		"one-row":         {sysKafkaLH, sysKafkaRaw},
		"handoff":         {sysKafkaLH, sysKafkaLHWait5},
		caseOutbox:        {sysRelay, sysTxn, sysTxn1},
		caseOutboxTrickle: {sysRelay, sysTxn, sysTxn1},
	}
	var all []*series
	index := map[[2]string]*series{}
	for _, c := range f.cases {
		for _, sys := range systems[c] {
			s := &series{system: sys, kase: c}
			all = append(all, s)
			index[[2]string{sys, c}] = s
		}
	}
	for r := 1; r <= f.rounds; r++ {
		for _, c := range f.cases {
			if c == caseOutbox {
				if err := b.outboxFill(ctx); err != nil {
					return fmt.Errorf("round %d, the outbox backlog: %w", r, err)
				}
			}
			order := slices.Clone(systems[c])
			if r%2 == 0 {
				slices.Reverse(order)
			}
			for _, sys := range order {
				mctx, cancel := context.WithTimeout(ctx, f.duration)
				smp, err := b.one(mctx, sys, c)
				cancel()
				if err != nil {
					return fmt.Errorf("round %d, %s on %s: %w", r, c, sys, err)
				}
				index[[2]string{sys, c}].samples = append(index[[2]string{sys, c}].samples, smp)
				fmt.Fprintf(stderr, "  r%d %-8s %-17s %7d ops %9.0f ops/s  p50 %7.2f ms  p99 %7.2f ms\n",
					r, c, sys, smp.ops, smp.rate(), ms(smp.quantile(0.5)), ms(smp.quantile(0.99)))
			}
		}
	}
	rep := newReport("kafka", f.rounds, all, sysKafkaLH, sysKafkaRaw)
	for _, res := range rep.Results { // leasehold over plain franz-go as well
		if res.System == sysFranz && res.JobsPerSec > 0 {
			for _, l := range rep.Results {
				if l.System == sysKafkaLH && l.Case == res.Case {
					rep.Ratios[res.Case+"/franz-go"] = l.JobsPerSec / res.JobsPerSec
				}
			}
		}
	}
	delete(rep.Ratios, "handoff") // a latency case: no rate ratio
	outboxRatios(&rep, index)
	rep.Server = &b.server
	js := kafkaReport{Report: rep}
	tables := kafkaTables(rep, all)
	if f.hasOutbox() {
		js.Outbox = b.outboxJSON()
		tables = append(tables, b.outboxTables(rep, index, js.Outbox)...)
	}
	printTables(stdout, "kafka", machineLine(version+" ("+where+")", f.settings(), began), f.markdown, tables)
	if f.jsonPath != "" {
		if err := writeJSON(f.jsonPath, js); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "kafka suite: done in %v\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// kafkaTables returns the throughput table, the ratios and the handoff
// latencies.
func kafkaTables(rep Report, all []*series) []ptable {
	thr := ptable{
		title: "Throughput: records/s from offset 0 to the log end (medians over rounds)",
		notes: []string{
			"franz-go: one client consuming every partition, no database; leasehold: kafka, one member owning every " +
				"partition, each batch a fenced transaction advancing the stored offset; raw-sql: a franz-go client and a " +
				"goroutine per partition sending the consumer's statements (BEGIN with the fence's timeouts, lease check, " +
				"effects, offset advance, COMMIT) directly",
			"noop: no effects; one-row: one ledger row per record (one INSERT ... unnest per batch)",
		},
		header: []string{"case", "system", "records", "records/s", "records/s per round"},
	}
	lat := ptable{
		title: "Handoff: time from lease grant to the first record in the handler",
		notes: []string{"a second worker joins and leaves repeatedly while a slow handler (50 ms per 1-record batch) keeps a backlog " +
			"in every partition; one sample per grant"},
		header: []string{"system", "grants", "p50 ms", "p99 ms", "max ms"},
	}
	for i, s := range all {
		r := rep.Results[i]
		if strings.HasPrefix(r.Case, caseOutbox) {
			continue // outboxTables
		}
		var rounds []string
		var ops []float64
		for _, x := range s.samples {
			rounds = append(rounds, f0(x.rate()))
			ops = append(ops, float64(x.ops))
		}
		if r.Case == "handoff" {
			var m sample
			for _, x := range s.samples {
				m = m.merge(x)
			}
			lat.add(r.System, fmt.Sprint(len(m.lat)), f1(ms(m.quantile(0.5))), f1(ms(m.quantile(0.99))), f1(ms(m.quantile(1))))
			continue
		}
		thr.add(r.Case, r.System, f0(median(ops)), f0(r.JobsPerSec), strings.Join(rounds, " "))
	}
	ratios := ptable{title: "Ratios (median records/s)", header: []string{"case", "ratio"}}
	keys := make([]string, 0, len(rep.Ratios))
	for k := range rep.Ratios {
		if !strings.HasPrefix(k, caseOutbox) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := k + " leasehold/raw-sql"
		if c, ok := strings.CutSuffix(k, "/franz-go"); ok {
			name = c + " leasehold/franz-go"
		}
		ratios.add(name, f2(rep.Ratios[k]))
	}
	out := []ptable{}
	if len(thr.rows) > 0 {
		out = append(out, thr)
	}
	if len(ratios.rows) > 0 {
		out = append(out, ratios)
	}
	if len(lat.rows) > 0 {
		out = append(out, lat)
	}
	return out
}

// one measures case c on system sys.
func (b *kafkaBench) one(ctx context.Context, sys, c string) (sample, error) {
	b.seq++
	if strings.HasPrefix(c, caseOutbox) {
		return b.outbox(ctx, sys, c)
	}
	group := fmt.Sprintf("bench-kafka-%d", b.seq)
	switch {
	case c == "handoff":
		wait := 100 * time.Millisecond
		if sys == sysKafkaLHWait5 {
			wait = 5 * time.Second
		}
		return b.handoff(ctx, group, wait)
	case sys == sysFranz:
		return b.franz(ctx)
	case sys == sysKafkaLH:
		return b.leasehold(ctx, group, c == "one-row")
	default:
		return b.rawSQL(ctx, group, c == "one-row")
	}
}

func (b *kafkaBench) total() int64 {
	var n int64
	for _, e := range b.ends {
		n += e
	}
	return n
}
