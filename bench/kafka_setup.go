package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// openKafkaBench starts or connects to PostgreSQL and Kafka, creates a
// database and a topic of the suite's own, produces the records and opens
// the pools. cleanup undoes it all.
func openKafkaBench(ctx context.Context, f kafkaFlags, stderr io.Writer) (b *kafkaBench, version, where string, cleanup func(), err error) {
	// pg_stat_statements, for the outbox cases' statement counts.
	url, where, stopServer, err := databaseWith(ctx, !f.nonDurable, map[string]string{"shared_preload_libraries": "pg_stat_statements"})
	if err != nil {
		return nil, "", "", nil, err
	}
	undo := undoStack{stopServer}
	cleanup = undo.run
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	fail := func(err error) (*kafkaBench, string, string, func(), error) { return nil, "", "", nil, err }
	var rb [4]byte
	rand.Read(rb[:])
	suffix := hex.EncodeToString(rb[:])
	b = &kafkaBench{f: f, topic: "leasehold-bench-" + suffix, stderr: stderr, dbName: "leasehold_bench_kafka_" + suffix}

	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return fail(fmt.Errorf("connect: %w", err))
	}
	undo.push(func() { admin.Close(context.Background()) })
	if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return fail(err)
	}
	// The statistics are read over a pool on the server's own database,
	// so that reading them counts nowhere in the bench database.
	scfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fail(err)
	}
	scfg.MaxConns, scfg.MinConns = 1, 0
	if b.stats, err = pgxpool.NewWithConfig(ctx, scfg); err != nil {
		return fail(err)
	}
	undo.push(b.stats.Close)
	settings, err := serverDurability(ctx, b.stats)
	if err != nil {
		return fail(err)
	}
	b.server = settings
	if where == envURL {
		where += ", " + settings.String()
	}
	if b.statements, err = enableStatements(ctx, b.stats); err != nil {
		return fail(err)
	}
	if !b.statements && f.hasOutbox() {
		fmt.Fprintln(stderr, "kafka suite: pg_stat_statements is not loaded (shared_preload_libraries); no statement counts")
	}
	if f.hasOutbox() {
		if b.postmaster, err = postmasterPID(ctx, b.stats); err != nil {
			fmt.Fprintf(stderr, "kafka suite: no server CPU: %v\n", err)
			b.postmaster = 0
		}
	}
	dbName := b.dbName
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+quoteIdent(dbName)); err != nil {
		return fail(fmt.Errorf("create the bench database (the role needs CREATEDB): %w", err))
	}
	undo.push(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(dctx, "DROP DATABASE IF EXISTS "+quoteIdent(dbName)+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(stderr, "kafka: drop database %s: %v\n", dbName, err)
		}
	})
	base, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fail(err)
	}
	base.ConnConfig.Database = dbName
	base.MinConns = 0
	open := func(conns int32) (*pgxpool.Pool, error) {
		c := base.Copy()
		c.MaxConns = conns
		p, err := pgxpool.NewWithConfig(ctx, c)
		if err == nil {
			undo.push(p.Close)
		}
		return p, err
	}
	if b.ctl, err = open(2); err != nil {
		return fail(err)
	}
	if b.lh, err = open(int32(f.partitions)); err != nil {
		return fail(err)
	}
	if b.raw, err = open(int32(f.partitions)); err != nil {
		return fail(err)
	}
	if err := migrate(ctx, b.ctl, ""); err != nil {
		return fail(fmt.Errorf("migrate: %w", err))
	}
	if _, err := b.ctl.Exec(ctx, `CREATE TABLE kafka_effects (topic text, partition int, "offset" bigint, value bytea)`); err != nil {
		return fail(err)
	}
	if b.sql, err = renderKafkaSQL(""); err != nil {
		return fail(err)
	}
	if f.hasOutbox() {
		if err := b.openOutbox(ctx, base, undo.push); err != nil {
			return fail(err)
		}
	}

	if f.brokers == "" {
		kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(f.partitions), b.topic))
		if err != nil {
			return fail(fmt.Errorf("kfake: %w", err))
		}
		undo.push(kc.Close)
		b.brokers = kc.ListenAddrs()
		where += ", kfake in process"
	} else {
		b.brokers = strings.Split(f.brokers, ",")
		if err := createTopic(ctx, b.brokers, b.topic, int32(f.partitions)); err != nil {
			return fail(err)
		}
		undo.push(func() { deleteTopic(b.brokers, b.topic) })
		where += ", Kafka at " + f.brokers
	}
	if slices.ContainsFunc(f.cases, func(c string) bool { return !strings.HasPrefix(c, caseOutbox) }) {
		fmt.Fprintf(stderr, "kafka suite: producing %d records...\n", f.records)
		if b.ends, err = produceRecords(ctx, b.brokers, b.topic, f.records); err != nil {
			return fail(err)
		}
	}
	return b, version, where, cleanup, nil
}

// produceRecords writes n records of 100 bytes with keys spread over the
// partitions and returns each partition's log end.
func produceRecords(ctx context.Context, brokers []string, topic string, n int) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var mu sync.Mutex
	ends := map[int32]int64{}
	var first error
	val := []byte(strings.Repeat("x", 100))
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: val}, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			if err == nil {
				ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	return ends, first
}
