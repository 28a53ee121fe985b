package main

import (
	"fmt"
	"slices"
	"strings"
)

// kafkaReport is the kafka suite's JSON report: the common shape, and the
// outbox cases' own numbers.
type kafkaReport struct {
	Report
	Outbox *outboxReport `json:"outbox,omitempty"`
}

// outboxReport is the outbox cases' part of the JSON report.
type outboxReport struct {
	// TxnRecords is how many records a Kafka transaction holds at most
	// (the relay's MaxRecords; the bare producers' transactions).
	TxnRecords int `json:"records_per_kafka_transaction"`
	// Target is the relay's backlog throughput target over the bare
	// producers, one per partition.
	Target float64 `json:"target"`
	// FillJobsPerSec is the median rate at which handlers appended the
	// backlog (untimed).
	FillJobsPerSec float64 `json:"fill_jobs_per_sec,omitempty"`
	// Statements are the bench database's statements per published record
	// ("drain", "trickle") or per second ("idle"), by statement name
	// (head, read, read-segment, delete, relay: their sum; append, seal:
	// the handlers'; all: every statement), with the spread over rounds.
	Statements map[string]map[string]stmtSpread `json:"statements,omitempty"`
	// IdleKafkaRequestsPerSec is the relay's Kafka requests per second in
	// the idle window.
	IdleKafkaRequestsPerSec *Spread `json:"idle_kafka_requests_per_sec,omitempty"`
	// Runs are each measurement's own numbers, by "system/case", one per
	// round.
	Runs map[string][]outboxRun `json:"runs"`
}

// stmtSpread is calls, rows and execution µs per unit, over the rounds.
type stmtSpread struct {
	Calls Spread `json:"calls"`
	Rows  Spread `json:"rows"`
	Us    Spread `json:"exec_us"`
}

// outboxRatios adds the relay's backlog rate over each bare system's, the
// median of the per-round ratios with their spread.
func outboxRatios(rep *Report, index map[[2]string]*series) {
	relay := index[[2]string{sysRelay, caseOutbox}]
	if relay == nil {
		return
	}
	for _, peer := range []string{sysTxn, sysTxn1} {
		p := index[[2]string{peer, caseOutbox}]
		if p == nil {
			continue
		}
		var rs []float64
		for i := range min(len(relay.samples), len(p.samples)) {
			if d := p.samples[i].rate(); d > 0 {
				rs = append(rs, relay.samples[i].rate()/d)
			}
		}
		if sp, ok := spreadOf(rs); ok {
			k := caseOutbox + "/" + peer
			rep.Ratios[k] = sp.Median
			if rep.RatioSpread == nil {
				rep.RatioSpread = map[string]Spread{}
			}
			rep.RatioSpread[k] = sp
		}
	}
}

// outboxJSON returns the outbox cases' part of the JSON report.
func (b *kafkaBench) outboxJSON() *outboxReport {
	ob := b.ob
	out := &outboxReport{TxnRecords: ob.txn, Target: outboxTarget, Runs: map[string][]outboxRun{},
		Statements: map[string]map[string]stmtSpread{}}
	for k, runs := range ob.runs {
		out.Runs[k[0]+"/"+k[1]] = runs
	}
	relayRuns := func(c string) []outboxRun { return ob.runs[[2]string{sysRelay, c}] }
	var fill []float64
	for _, r := range relayRuns(caseOutbox) {
		fill = append(fill, r.FillRate)
	}
	out.FillJobsPerSec = median(fill)
	names := append(slices.Clone(relayStatements), "relay", "append", "seal", "all")
	per := func(window string, runs []outboxRun, stmts func(outboxRun) outboxStmts, unit func(outboxRun) float64) {
		m := map[string]stmtSpread{}
		for _, name := range names {
			var calls, rows, us []float64
			for _, r := range runs {
				s := stmts(r)
				u := unit(r)
				if s == nil || u <= 0 {
					continue
				}
				c := s[name]
				if name == "relay" {
					c = s.relay()
				}
				calls = append(calls, float64(c.Calls)/u)
				rows = append(rows, float64(c.Rows)/u)
				us = append(us, c.Ms*1000/u)
			}
			cs, ok := spreadOf(calls)
			if !ok {
				continue
			}
			rs, _ := spreadOf(rows)
			ts, _ := spreadOf(us)
			m[name] = stmtSpread{Calls: cs, Rows: rs, Us: ts}
		}
		if len(m) > 0 {
			out.Statements[window] = m
		}
	}
	records := func(r outboxRun) float64 { return float64(r.Records) }
	per("drain", relayRuns(caseOutbox), func(r outboxRun) outboxStmts { return r.Stmts }, records)
	per("trickle", relayRuns(caseOutboxTrickle), func(r outboxRun) outboxStmts { return r.Stmts }, records)
	var idle []outboxRun
	var reqs []float64
	for _, r := range relayRuns(caseOutboxTrickle) {
		if r.Idle != nil {
			idle = append(idle, r)
			reqs = append(reqs, float64(r.Idle.Requests)/r.Idle.Seconds)
		}
	}
	per("idle", idle, func(r outboxRun) outboxStmts { return r.Idle.Stmts }, func(r outboxRun) float64 { return r.Idle.Seconds })
	if sp, ok := spreadOf(reqs); ok {
		out.IdleKafkaRequestsPerSec = &sp
	}
	return out
}

// spreadCell formats a spread as "median (min–max)", or the median alone
// for one round.
func spreadCell(s Spread, format func(float64) string) string {
	if s.Rounds <= 1 || s.Min == s.Max {
		return format(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", format(s.Median), format(s.Min), format(s.Max))
}

// statsNote describes each --outbox-stats mode.
var statsNote = map[string]string{
	"analyze": "ANALYZE after the backlog was appended, untimed",
	"none":    "none (never analyzed with rows in them)",
	"auto":    "as autovacuum left them",
}

func f4(x float64) string { return fmt.Sprintf("%.4f", x) }

// outboxTables returns the outbox cases' tables.
func (b *kafkaBench) outboxTables(rep Report, index map[[2]string]*series, js *outboxReport) []ptable {
	var out []ptable
	ob := b.ob
	runsOf := func(sys, c string) []outboxRun { return ob.runs[[2]string{sys, c}] }
	cpuCols := func(sys, c string) (string, string) {
		var server, client []float64
		for _, r := range runsOf(sys, c) {
			server = append(server, r.ServerCPUus)
			client = append(client, r.ClientCPUus)
		}
		if b.postmaster == 0 {
			return "-", f1(median(client))
		}
		return f1(median(server)), f1(median(client))
	}
	kafkaCols := func(sys, c string, records int) (string, string) {
		var txns, reqs []float64
		for _, r := range runsOf(sys, c) {
			if r.Records > 0 {
				txns = append(txns, float64(r.Txns))
				reqs = append(reqs, float64(r.Requests)*float64(records)/float64(r.Records))
			}
		}
		return f0(median(txns)), f0(median(reqs))
	}
	systemName := map[string]string{
		sysRelay: "relay", sysTxn: fmt.Sprintf("franz-go-txn (%d producers)", b.f.partitions), sysTxn1: "franz-go-txn-1 (1 producer)",
	}
	if s := index[[2]string{sysRelay, caseOutbox}]; s != nil {
		t := ptable{
			title: "Outbox relay, backlog: records/s from the start of the drain until the last record is visible to a read_committed consumer (medians over rounds)",
			notes: []string{
				fmt.Sprintf("relay: kafka.Relay run by a worker.Worker (worker.Config.Relay, defaults but MaxRecords %d) over a backlog of %d records "+
					"appended beforehand, untimed (median %.0f jobs/s), by queue.HandleTx jobs appending one record each with outbox.Add "+
					"(one handler transaction, so one outbox segment, per record), timed from the worker's first lease grant; "+
					"the outbox tables' planner statistics: %s (--outbox-stats)",
					ob.txn, b.f.outboxRecords, js.FillJobsPerSec, statsNote[b.f.outboxStats]),
				fmt.Sprintf("franz-go-txn: bare transactional producers publishing the same records (same keys, values, headers) from memory, "+
					"one per group partition with that partition's records (as the relay), %d records per Kafka transaction, timed from "+
					"their creation (InitProducerID included, as the relay's); franz-go-txn-1: one such producer for all records", ob.txn),
				"p50/p99: from the start (grant; producers' creation) until each record was read: how far into the drain it became visible",
				"CPU µs per record over the timed window: server: the PostgreSQL server's processes; client: this process (the relay and " +
					"its worker, or the bare producers; the in-process broker and the consumer alike for all)",
			},
			header: []string{"system", "records", "records/s", "records/s per round", "p50 ms", "p99 ms", "Kafka txns", "Kafka requests",
				"server CPU µs/record", "client CPU µs/record"},
		}
		for _, sys := range []string{sysRelay, sysTxn, sysTxn1} {
			s := index[[2]string{sys, caseOutbox}]
			if s == nil {
				continue
			}
			r := s.result()
			var rounds []string
			for _, x := range s.samples {
				rounds = append(rounds, f0(x.rate()))
			}
			txns, reqs := kafkaCols(sys, caseOutbox, b.f.outboxRecords)
			server, client := cpuCols(sys, caseOutbox)
			t.add(systemName[sys], fmt.Sprint(b.f.outboxRecords), f0(r.JobsPerSec), strings.Join(rounds, " "), f1(r.P50Ms), f1(r.P99Ms),
				txns, reqs, server, client)
		}
		out = append(out, t)
		rt := ptable{
			title:  "Outbox relay / bare producers, backlog records/s: median of the per-round ratios (round i over round i)",
			notes:  []string{fmt.Sprintf("target: the relay at least %.2fx the bare producers, one per partition (issue 28); one producer in all is for reference", outboxTarget)},
			header: []string{"ratio", "median", "per round", "min–max", "target", "verdict"},
		}
		for _, peer := range []string{sysTxn, sysTxn1} {
			k := caseOutbox + "/" + peer
			sp, ok := rep.RatioSpread[k]
			if !ok {
				continue
			}
			var per []string
			p := index[[2]string{peer, caseOutbox}]
			for i := range min(len(s.samples), len(p.samples)) {
				if d := p.samples[i].rate(); d > 0 {
					per = append(per, f2(s.samples[i].rate()/d))
				}
			}
			target, verdict := "-", "-"
			if peer == sysTxn {
				target, verdict = f2(outboxTarget), "ok"
				switch {
				case sp.Median < outboxTarget:
					verdict = "BELOW TARGET"
				case sp.Min < outboxTarget:
					verdict = "ok (median); some rounds below"
				}
			}
			rt.add("relay / "+systemName[peer], f2(sp.Median), strings.Join(per, " "), f2(sp.Min)+"–"+f2(sp.Max), target, verdict)
		}
		out = append(out, rt)
	}
	if index[[2]string{sysRelay, caseOutboxTrickle}] != nil {
		t := ptable{
			title: fmt.Sprintf("Outbox, trickle of %g records/s for %v: latency until visible to a read_committed consumer", b.f.outboxRate, b.f.outboxTrickle),
			notes: []string{
				"relay: one record per queue.HandleTx job, jobs enqueued one by one at the rate into a running worker with its relay (its producers " +
					"opened beforehand by one record per partition); latency from the reply to the handler transaction's COMMIT (a pgx tracer on " +
					"the worker's pool) until the consumer read the record",
				"franz-go-txn, -1: the records handed at the same rate (round robin over the producers) to bare transactional producers opened " +
					"beforehand, each publishing what has arrived (up to a transaction's size) per Kafka transaction; latency from a record's arrival",
				"p50, p99: medians over rounds; max: over all rounds",
			},
			header: []string{"system", "records", "records/s", "p50 ms", "p99 ms", "max ms", "p50 per round", "p99 per round", "Kafka txns", "Kafka requests"},
		}
		for _, sys := range []string{sysRelay, sysTxn, sysTxn1} {
			s := index[[2]string{sys, caseOutboxTrickle}]
			if s == nil {
				continue
			}
			r := s.result()
			var p50s, p99s []string
			var all sample
			for _, x := range s.samples {
				p50s = append(p50s, f1(ms(x.quantile(0.5))))
				p99s = append(p99s, f1(ms(x.quantile(0.99))))
				all = all.merge(x)
			}
			txns, reqs := kafkaCols(sys, caseOutboxTrickle, b.f.outboxTrickleRecords())
			t.add(systemName[sys], fmt.Sprint(b.f.outboxTrickleRecords()), f0(r.JobsPerSec), f1(r.P50Ms), f1(r.P99Ms),
				f1(ms(all.quantile(1))), strings.Join(p50s, " "), strings.Join(p99s, " "), txns, reqs)
		}
		out = append(out, t)
	}
	if len(js.Statements) > 0 || js.IdleKafkaRequestsPerSec != nil {
		t := ptable{
			title: "Outbox: what the database does (pg_stat_statements in the bench database; median over rounds, min–max)",
			notes: []string{
				"head, read, read-segment, delete: the relay's statements; relay: their sum; append, seal: the handlers' (outbox.Add, and the " +
					"runner's seal before the fence check); all: every statement in the bench database in the window, the worker's queue, " +
					"leases and membership included",
				"execution µs: pg_stat_statements' total_exec_time (the server's time in the statement, waits for the CPU included)",
				"drain: over the backlog's drain, per published record; trickle: over the trickle, per record; idle: per second of a " +
					fmt.Sprintf("%v window after the trickle with the worker and its relay running and nothing to publish", b.f.outboxIdle),
			},
			header: []string{"window", "statement", "calls", "rows", "execution µs"},
		}
		for _, w := range []struct{ key, label string }{{"drain", "drain, per record"}, {"trickle", "trickle, per record"}, {"idle", "idle, per second"}} {
			m := js.Statements[w.key]
			for _, name := range []string{"head", "read", "read-segment", "delete", "relay", "append", "seal", "all"} {
				sp, ok := m[name]
				if !ok || (w.key != "trickle" && (name == "append" || name == "seal")) {
					continue
				}
				t.add(w.label, name, spreadCell(sp.Calls, f4), spreadCell(sp.Rows, f4), spreadCell(sp.Us, f1))
			}
			if w.key == "idle" && js.IdleKafkaRequestsPerSec != nil {
				t.add(w.label, "the relay's Kafka requests", spreadCell(*js.IdleKafkaRequestsPerSec, f4), "-", "-")
			}
		}
		out = append(out, t)
	}
	return out
}
