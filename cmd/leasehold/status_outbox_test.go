package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/outbox"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// emit is the args of a job whose handler appends two outbox records.
type emit struct{}

func (emit) Kind() string { return "emit" }

// outboxRows returns the rows of the outbox section of status output out:
// the fields of each line after its header, up to the blank line.
func outboxRows(t *testing.T, out string) [][]string {
	t.Helper()
	sec := strings.Index(out, "\noutbox: ")
	if sec < 0 {
		t.Fatalf("no outbox section:\n%s", out)
	}
	lines := strings.Split(out[sec+1:], "\n")
	if f := strings.Fields(lines[1]); !slices.Equal(f, []string{"PARTITION", "SEGMENTS", "RECORDS", "OLDEST", "OWNER", "TOKEN"}) {
		t.Fatalf("outbox header %q:\n%s", f, out)
	}
	var rows [][]string
	for _, l := range lines[2:] {
		if l == "" || strings.HasPrefix(l, "(") {
			break
		}
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// The outbox a handler fills (no relay publishes it) shows per partition
// with segments waiting, with the partition's owner and token; a group
// whose handlers never used the outbox has none ("outbox": null, no
// section).
func TestStatusOutbox(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	db := pgtest.DBOn(t, pool)
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[emit]) error {
		return outbox.Add(ctx, tx, outbox.Record{Topic: "out", Value: []byte("a")}, outbox.Record{Topic: "out", Value: []byte("b")})
	})
	w, err := worker.New(db, worker.Config{Group: "g", Partitions: 4, ID: "w1", Workers: ws,
		Lease: lease.Config{TTL: 10 * time.Second}, Queue: queue.ProcessorConfig{PollInterval: 20 * time.Millisecond}})
	pgtest.Must(t, err)
	pgtest.Must(t, w.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		w.Stop(ctx)
	})

	var rep admin.Status
	pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url))
	if len(rep.Groups) != 1 || rep.Groups[0].Outbox != nil {
		t.Fatalf("a group that never used the outbox: %+v; want \"outbox\": null", rep.Groups)
	}
	out, err := runIn(t, "", "status", "--database-url", url)
	pgtest.Must(t, err)
	if strings.Contains(out, "outbox") {
		t.Errorf("an outbox section without an outbox:\n%s", out)
	}

	client, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	var ids []int64
	for range 3 {
		res, err := client.Enqueue(ctx, queue.Job{Group: "g", Key: "k", Args: emit{}})
		pgtest.Must(t, err)
		ids = append(ids, res.ID)
	}
	for _, id := range ids {
		for {
			j, err := client.JobInfo(ctx, id)
			pgtest.Must(t, err)
			if j.State == queue.StateCompleted {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("job %d is %s", id, j.State)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	p := partition.OfString("k", 4)
	pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url))
	g := rep.Groups[0]
	var token int64
	for _, ps := range g.Partitions {
		if ps.Partition == p {
			token = ps.Token
		}
	}
	o := g.Outbox
	if o == nil || len(o.Partitions) != 1 {
		t.Fatalf("outbox %+v; want partition %d's 3 segments", o, p)
	}
	op := o.Partitions[0]
	if o.Segments != 3 || o.Records != 6 || o.RecordsPartial || op.Partition != p || op.Segments != 3 || op.Records != 6 ||
		op.RecordsPartial || op.Owner != "w1" || op.Token != token || token == 0 || !op.Held ||
		op.OldestAgeMS < 0 || op.OldestAgeMS > time.Minute.Milliseconds() || o.OldestAgeMS != op.OldestAgeMS ||
		(rep.Now.Sub(op.OldestAt)-time.Duration(op.OldestAgeMS)*time.Millisecond).Abs() > 5*time.Second {
		t.Errorf("outbox %+v, partition %+v (now %v); want 3 segments, 6 records in partition %d owned by w1 under token %d",
			o, op, rep.Now, p, token)
	}

	out, err = runIn(t, "", "status", "--database-url", url)
	pgtest.Must(t, err)
	if !strings.Contains(out, "outbox: 3 segments (6 records) waiting to be published to Kafka; oldest ") {
		t.Errorf("no outbox summary:\n%s", out)
	}
	rows := outboxRows(t, out)
	if len(rows) != 1 || len(rows[0]) != 6 || !slices.Equal([]string{rows[0][0], rows[0][1], rows[0][2], rows[0][4], rows[0][5]},
		[]string{fmt.Sprint(p), "3", "6", "w1", fmt.Sprint(token)}) {
		t.Errorf("outbox rows %q; want partition %d: 3 segments, 6 records, w1, token %d:\n%s", rows, p, token, out)
	}
	if strings.Index(out, "\noutbox: ") > strings.Index(out, "\nMEMBER") {
		t.Errorf("the outbox section is not before the members:\n%s", out)
	}
}

// seedOutbox writes the outbox of group as a runner would have: for each
// partition p in segs, segs[p] segments of recs[p] records each, numbered
// from first[p], the oldest committed age[p] ago and each next one a
// millisecond later, the head after the last.
func seedOutbox(t *testing.T, pool *pgxpool.Pool, group string, segs, recs, first map[int]int, age map[int]time.Duration) {
	t.Helper()
	for p, n := range segs {
		_, err := pool.Exec(context.Background(), `INSERT INTO leasehold.outbox_heads (group_name, partition, next_seq) VALUES ($1, $2, $3)`,
			group, p, first[p]+n)
		pgtest.Must(t, err)
		_, err = pool.Exec(context.Background(), `
			INSERT INTO leasehold.outbox_segments (group_name, partition, seq, scope, records, token, committed_at)
			SELECT $1, $2, s, (1000000 * ($2 + 1) + s), $5, 1,
			       clock_timestamp() - make_interval(secs => $6) + (s - $3) * interval '1 millisecond'
			FROM generate_series($3::bigint, $3 + $4 - 1) AS s`,
			group, p, first[p], n, recs[p], age[p].Seconds())
		pgtest.Must(t, err)
	}
}

// Segments numbered from far beyond 1 count by their sequence numbers;
// a partition with more than admin.OutboxCounted segments waiting counts
// the records of those only, and says so ("1000+"); with many partitions
// waiting the table lists the 10 with the oldest segments unless --all;
// a partition whose segments were all published has no row.
func TestStatusOutboxMany(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	_, err := pool.Exec(context.Background(), `INSERT INTO leasehold.groups (name, partitions) VALUES ('h', 16)`)
	pgtest.Must(t, err)
	segs, recs, first, age := map[int]int{}, map[int]int{}, map[int]int{}, map[int]time.Duration{}
	for p := range 12 { // partition p: p+1 segments of 2 records, from 100p+1, the oldest p minutes old
		segs[p], recs[p], first[p], age[p] = p+1, 2, 100*p+1, time.Duration(p)*time.Minute+time.Second
	}
	segs[11], recs[11] = admin.OutboxCounted+202, 1
	seedOutbox(t, pool, "h", segs, recs, first, age)
	// Partition 12 published everything: its head alone is left.
	_, err = pool.Exec(context.Background(), `INSERT INTO leasehold.outbox_heads (group_name, partition, next_seq) VALUES ('h', 12, 40)`)
	pgtest.Must(t, err)

	var rep admin.Status
	pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url))
	o := rep.Groups[0].Outbox
	if o == nil || len(o.Partitions) != 12 {
		t.Fatalf("outbox %+v; want 12 partitions", o)
	}
	var wantSegs, wantRecs int64
	for i, op := range o.Partitions {
		n, r := int64(segs[i]), int64(segs[i]*recs[i])
		partial := i == 11
		if partial {
			r = admin.OutboxCounted
		}
		wantSegs += n
		wantRecs += r
		if op.Partition != i || op.Segments != n || op.Records != r || op.RecordsPartial != partial || op.Owner != "" ||
			(time.Duration(op.OldestAgeMS)*time.Millisecond-age[i]).Abs() > 5*time.Second {
			t.Errorf("partition %+v; want %d: %d segments, %d records (partial %v), no owner, oldest %v", op, i, n, r, partial, age[i])
		}
	}
	if o.Segments != wantSegs || o.Records != wantRecs || !o.RecordsPartial || o.OldestAgeMS != o.Partitions[11].OldestAgeMS {
		t.Errorf("outbox totals %d segments, %d records (partial %v), oldest %dms; want %d, %d (partial), partition 11's",
			o.Segments, o.Records, o.RecordsPartial, o.OldestAgeMS, wantSegs, wantRecs)
	}

	listed := func(args ...string) ([]string, string) {
		out, err := runIn(t, "", append([]string{"status", "--database-url", url}, args...)...)
		pgtest.Must(t, err)
		var ps []string
		for _, r := range outboxRows(t, out) {
			ps = append(ps, r[0])
			if r[0] == "11" && (r[1] != fmt.Sprint(admin.OutboxCounted+202) || r[2] != fmt.Sprintf("%d+", admin.OutboxCounted) || r[4] != "-") {
				t.Errorf("partition 11's row %q; want %d segments, %d+ records, no owner", r, admin.OutboxCounted+202, admin.OutboxCounted)
			}
		}
		return ps, out
	}
	ps, out := listed()
	if want := []string{"2", "3", "4", "5", "6", "7", "8", "9", "10", "11"}; !slices.Equal(ps, want) ||
		!strings.Contains(out, "(the 10 partitions with the oldest segments; 2 more have segments waiting; --all lists them)") {
		t.Errorf("outbox partitions listed %q; want the 10 oldest, %q, and a note:\n%s", ps, want, out)
	}
	summary := fmt.Sprintf("outbox: %d segments (%d+ records) waiting to be published to Kafka; oldest 11m", wantSegs, wantRecs)
	if !strings.Contains(out, summary) {
		t.Errorf("no summary %q:\n%s", summary, out)
	}
	if ps, out = listed("--all"); len(ps) != 12 || strings.Contains(out, "more have segments waiting") {
		t.Errorf("--all lists outbox partitions %q:\n%s", ps, out)
	}
}
