package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/outboxtx"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/outbox"
	"github.com/leasehold/leasehold/partition"
)

// relayFixture is a relay of group "g" on an in-process Kafka with topic
// "out", and the outbox it publishes.
type relayFixture struct {
	ctx     context.Context
	pool    *pgxpool.Pool
	db      *leasehold.DB
	st      *store.Statements
	brokers []string
	cluster *kfake.Cluster // nil for newRelayFixtureOn
	r       *Relay

	mu        sync.Mutex
	published []Publish
}

func newRelayFixture(t *testing.T, maxRecords int) *relayFixture {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "out"))
	pgtest.Must(t, err)
	t.Cleanup(c.Close)
	f := newRelayFixtureOn(t, c.ListenAddrs(), maxRecords)
	f.cluster = c
	return f
}

// newRelayFixtureOn is newRelayFixture on the Kafka of brokers, with a
// database of its own.
func newRelayFixtureOn(t *testing.T, brokers []string, maxRecords int) *relayFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	pool := pgtest.Pool(t)
	f := &relayFixture{ctx: ctx, pool: pool, db: pgtest.DBOn(t, pool), brokers: brokers}
	var err error
	f.st, err = store.For(f.db.Schema())
	pgtest.Must(t, err)
	f.r, err = NewRelay(f.db, RelayConfig{Brokers: f.brokers, MaxRecords: maxRecords, OnPublish: func(p Publish) {
		f.mu.Lock()
		f.published = append(f.published, p)
		f.mu.Unlock()
	}})
	pgtest.Must(t, err)
	pgtest.Must(t, f.r.Open(ctx, "g"))
	t.Cleanup(func() { f.r.Close(context.Background()) })
	return f
}

// add commits one segment of partition 0 holding values (key "k"); a
// value starting with "-" is appended in a savepoint rolled back.
func (f *relayFixture) add(t *testing.T, values ...string) {
	t.Helper()
	tx, err := f.pool.Begin(f.ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(f.ctx)
	box := outboxtx.New("test", f.st, "g", 0, 1, tx)
	ctx := outboxtx.With(f.ctx, box)
	for _, v := range values {
		rec := outbox.Record{Topic: "out", Key: []byte("k"), Value: []byte(v)}
		if strings.HasPrefix(v, "-") {
			sp, err := tx.Begin(ctx)
			pgtest.Must(t, err)
			pgtest.Must(t, outbox.Add(ctx, sp, rec))
			pgtest.Must(t, sp.Rollback(ctx))
			continue
		}
		pgtest.Must(t, outbox.Add(ctx, tx, rec))
	}
	pgtest.Must(t, box.Seal(ctx, tx))
	pgtest.Must(t, tx.Commit(ctx))
}

// grant returns a relay grant of partition 0 under token.
func (f *relayFixture) grant(token int64) *relayGrant {
	return &relayGrant{r: f.r, s: f.r.session(), o: partition.Ownership{Group: "g", Partition: 0, Token: fence.Token(token)},
		st: &relayPartition{token: fence.Token(token)}, log: slog.New(slog.DiscardHandler)}
}

// output reads topic "out" with read_committed until it holds want records
// (or 10s pass), then for 300ms more, and returns the values in order.
func (f *relayFixture) output(t *testing.T, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.ConsumeTopics("out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
	pgtest.Must(t, err)
	defer cl.Close()
	var out []string
	deadline, settle := time.Now().Add(10*time.Second), time.Time{}
	for {
		if settle.IsZero() && (len(out) >= want || time.Now().After(deadline)) {
			settle = time.Now().Add(300 * time.Millisecond)
		}
		if !settle.IsZero() && time.Now().After(settle) {
			return out
		}
		ctx, cancel := context.WithTimeout(f.ctx, 100*time.Millisecond)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
		cancel()
	}
}

// left returns how many segments and records the outbox still holds.
func (f *relayFixture) left(t *testing.T) (segments, records int) {
	t.Helper()
	pgtest.Must(t, f.pool.QueryRow(f.ctx, `SELECT (SELECT count(*) FROM leasehold.outbox_segments), (SELECT count(*) FROM leasehold.outbox_records)`).Scan(&segments, &records))
	return segments, records
}

// publishAll commits one segment per value and publishes them all with a
// grant of token, whose producer is then closed.
func (f *relayFixture) publishAll(t *testing.T, token int64, values ...string) {
	t.Helper()
	for _, v := range values {
		f.add(t, v)
	}
	g := f.grant(token)
	defer g.closeProducer()
	pgtest.Must(t, g.drain(f.ctx))
}

// refused drains with a grant of token and returns the *ProgressError it
// must fail with, whose Reason must contain reason.
func (f *relayFixture) refused(t *testing.T, token int64, reason string) *ProgressError {
	t.Helper()
	g := f.grant(token)
	defer g.closeProducer()
	err := g.drain(f.ctx)
	var pe *ProgressError
	if !errors.As(err, &pe) || !errors.Is(err, ErrProgressMismatch) || !strings.Contains(pe.Reason, reason) {
		t.Fatalf("drain with token %d = %v, want a *ProgressError (%q)", token, err, reason)
	}
	return pe
}

// exec runs a statement on the fixture's database (a reset, a restore).
func (f *relayFixture) exec(t *testing.T, sql string) {
	t.Helper()
	_, err := f.pool.Exec(f.ctx, sql)
	pgtest.Must(t, err)
}

// A relay killed after its Kafka commit and before anything after it
// (the deletion of the published segments): the next owner reads the
// progress that commit stored in Kafka, deletes those segments unpublished
// again, and publishes only what follows.
func TestRelayResumesFromTheProgressCommittedInKafka(t *testing.T) {
	t.Parallel()
	f := newRelayFixture(t, 1000)
	f.add(t, "a1", "a2")
	f.add(t, "b1")
	g1 := f.grant(1)
	p, err := g1.open(f.ctx)
	pgtest.Must(t, err)
	b, _, err := g1.read(f.ctx, p.progress)
	pgtest.Must(t, err)
	pgtest.Must(t, p.publish(f.ctx, b.records(), b.last, b.lastScope()))
	p.close() // killed: the published segments are still in the outbox
	if s, _ := f.left(t); s != 2 {
		t.Fatalf("%d segments left after the first owner's commit, want 2 (not deleted yet)", s)
	}
	f.add(t, "c1")
	g2 := f.grant(2)
	defer g2.closeProducer()
	pgtest.Must(t, g2.drain(f.ctx))
	if got := f.output(t, 4); !slices.Equal(got, []string{"a1", "a2", "b1", "c1"}) {
		t.Fatalf("output %v, want [a1 a2 b1 c1] once each", got)
	}
	f.mu.Lock()
	pubs := f.published
	f.mu.Unlock()
	if len(pubs) != 1 || pubs[0].First != 3 || pubs[0].Last != 3 || pubs[0].Records != 1 || pubs[0].Token != 2 {
		t.Errorf("the second owner published %+v, want segment 3 only (1 record, token 2)", pubs)
	}
	if s, r := f.left(t); s != 0 || r != 0 {
		t.Errorf("outbox holds %d segments, %d records after the drain, want none", s, r)
	}
}

// A newer owner's producer fences an earlier owner's: its transaction is
// refused with fence.ErrFenced, and nothing of it is published.
func TestRelayFencesAnEarlierOwnersProducer(t *testing.T) {
	t.Parallel()
	f := newRelayFixture(t, 1000)
	f.add(t, "x1", "x2")
	g1, g2 := f.grant(1), f.grant(2)
	p1, err := g1.open(f.ctx)
	pgtest.Must(t, err)
	defer p1.close()
	b, _, err := g1.read(f.ctx, p1.progress)
	pgtest.Must(t, err)
	defer g2.closeProducer()
	pgtest.Must(t, g2.drain(f.ctx)) // initialises the partition's producer again: p1 is fenced
	if err := p1.publish(f.ctx, b.records(), b.last, b.lastScope()); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("the earlier owner's publish = %v, want ErrFenced", err)
	}
	if got := f.output(t, 2); !slices.Equal(got, []string{"x1", "x2"}) {
		t.Fatalf("output %v, want [x1 x2] once each", got)
	}
}

// Progress in Kafka written for another outbox (the outbox tables were
// reset) stops the relay with a *ProgressError, recorded so that every
// later attempt refuses too (no retry prunes what the old progress
// covers), until an operator clears it; then the relay publishes every
// segment left, and commits progress of its own.
func TestRelayRefusesProgressOfAnotherOutboxUntilCleared(t *testing.T) {
	t.Parallel()
	f := newRelayFixture(t, 1000)
	f.publishAll(t, 1, "a", "b")
	f.exec(t, `TRUNCATE leasehold.outbox_heads, leasehold.outbox_segments, leasehold.outbox_records`)
	f.add(t, "after-reset-1")
	f.refused(t, 2, "another outbox")
	// The head catches up with the old progress: a retry must still refuse
	// (the recorded refusal).
	f.add(t, "after-reset-2")
	f.add(t, "after-reset-3")
	f.refused(t, 3, "another outbox")
	if s, _ := f.left(t); s != 3 {
		t.Fatalf("%d segments left, want the 3 new ones kept", s)
	}
	cleared, err := ClearRefusal(f.ctx, f.db, "g", 0)
	pgtest.Must(t, err)
	if !slices.Equal(cleared, []int{0}) {
		t.Fatalf("ClearRefusal cleared %v, want [0]", cleared)
	}
	g4 := f.grant(4)
	defer g4.closeProducer()
	pgtest.Must(t, g4.drain(f.ctx))
	f.add(t, "after-clear")
	g5 := f.grant(5) // a new owner finds this outbox's own progress
	defer g5.closeProducer()
	pgtest.Must(t, g5.drain(f.ctx))
	if got, want := f.output(t, 6), []string{"a", "b", "after-reset-1", "after-reset-2", "after-reset-3", "after-clear"}; !slices.Equal(got, want) {
		t.Fatalf("output %v, want %v", got, want)
	}
	var adopt bool
	pgtest.Must(t, f.pool.QueryRow(f.ctx, `SELECT adopt FROM leasehold.outbox_heads WHERE group_name = 'g' AND partition = 0`).Scan(&adopt))
	if adopt {
		t.Errorf("the adoption did not end once the outbox's own progress was committed")
	}
}

// Progress past the outbox's last segment (the database restored from an
// older backup) is refused, not taken as covering the new segments.
func TestRelayRefusesProgressAheadOfTheOutbox(t *testing.T) {
	t.Parallel()
	f := newRelayFixture(t, 1000)
	f.publishAll(t, 1, "a", "b", "c")
	f.exec(t, `UPDATE leasehold.outbox_heads SET next_seq = 2`) // the restore: the head is back at segment 1
	f.add(t, "after-restore")
	f.refused(t, 2, "past the outbox's last segment")
	if s, _ := f.left(t); s != 1 {
		t.Errorf("%d segments left, want the new one kept", s)
	}
}

// Two deployments (two databases) with a group of the same name and the
// same TransactionalIDPrefix on one Kafka cluster: the second's relay
// refuses the first's progress instead of taking it for its own.
func TestRelayRefusesAnotherDeploymentsProgress(t *testing.T) {
	t.Parallel()
	a := newRelayFixture(t, 1000)
	a.publishAll(t, 1, "a1", "a2")
	b := newRelayFixtureOn(t, a.brokers, 1000)
	for _, v := range []string{"b1", "b2", "b3"} {
		b.add(t, v)
	}
	b.refused(t, 1, "another outbox")
	if s, _ := b.left(t); s != 3 {
		t.Errorf("the second deployment's outbox holds %d segments, want its 3 kept", s)
	}
}

// A record of outbox.MaxRecordBytes, the most Add accepts, is published.
func TestRelayPublishesARecordOfMaxRecordBytes(t *testing.T) {
	t.Parallel()
	f := newRelayFixture(t, 1000)
	f.add(t, strings.Repeat("x", outbox.MaxRecordBytes-1)) // and the key "k"
	g := f.grant(1)
	defer g.closeProducer()
	pgtest.Must(t, g.drain(f.ctx))
	if got := f.output(t, 1); len(got) != 1 || len(got[0]) != outbox.MaxRecordBytes-1 {
		t.Fatalf("published %d records", len(got))
	}
}

// A Kafka transaction publishes whole segments, at most MaxRecords records
// unless one segment alone has more (published alone); a segment whose
// records were all rolled back (savepoint) publishes nothing.
func TestRelayPublishesWholeSegments(t *testing.T) {
	t.Parallel()
	f := newRelayFixture(t, 5)
	var want []string
	seg := func(prefix string, n int) {
		var vs []string
		for i := range n {
			vs = append(vs, fmt.Sprintf("%s%d", prefix, i))
		}
		want = append(want, vs...)
		f.add(t, vs...)
	}
	seg("a", 3)
	seg("b", 4)
	seg("c", 12)
	f.add(t, "-gone")
	seg("e", 2)
	g := f.grant(1)
	defer g.closeProducer()
	pgtest.Must(t, g.drain(f.ctx))
	if got := f.output(t, len(want)); !slices.Equal(got, want) {
		t.Fatalf("output %v\nwant   %v", got, want)
	}
	var got []string
	f.mu.Lock()
	for _, p := range f.published {
		got = append(got, fmt.Sprintf("%d-%d:%d", p.First, p.Last, p.Records))
	}
	f.mu.Unlock()
	if w := []string{"1-1:3", "2-2:4", "3-3:12", "4-5:2"}; !slices.Equal(got, w) {
		t.Errorf("transactions %v, want %v", got, w)
	}
	if s, r := f.left(t); s != 0 || r != 0 {
		t.Errorf("outbox holds %d segments, %d records, want none", s, r)
	}
}

// Kafka failing in each step of a publish, whether or not the broker acted
// on the request (a timed-out EndTxn is applied, then reported as failed:
// an outcome the relay cannot know), and the database's deletion failing
// after a commit: the relay retries as Run does (a new producer, the
// progress read again) and every record is published once.
func TestRelayPublishesOnceThroughFaults(t *testing.T) {
	t.Parallel()
	faults := map[string]kfake.Fault{
		"produce refused":                {Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.UnknownServerError},
		"produce applied, then failed":   {Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicasAfterAppend},
		"offset commit refused":          {Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.UnknownServerError},
		"add offsets refused":            {Keys: []kmsg.Key{kmsg.AddOffsetsToTxn}, Err: kerr.UnknownServerError, TopLevel: true},
		"commit refused":                 {Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, TopLevel: true},
		"commit applied, then timed out": {Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.RequestTimedOut, TopLevel: true, Count: 3},
	}
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newRelayFixture(t, 2)
			for i := range 6 {
				f.add(t, fmt.Sprintf("r%d", i))
			}
			h := f.cluster.Fault(fault)
			g := f.grant(1)
			defer g.closeProducer()
			failures := 0
			for attempt := 0; ; attempt++ {
				err := g.drain(f.ctx)
				if err == nil {
					break
				}
				failures++
				if attempt == 20 {
					t.Fatalf("still failing after 20 attempts: %v", err)
				}
				g.closeProducer()
			}
			if h.Hits() == 0 {
				t.Fatalf("the fault never hit")
			}
			want := []string{"r0", "r1", "r2", "r3", "r4", "r5"}
			if got := f.output(t, len(want)); !slices.Equal(got, want) {
				t.Fatalf("output %v, want %v once each (%d failed attempts)", got, want, failures)
			}
			if s, _ := f.left(t); s != 0 {
				t.Errorf("%d segments left", s)
			}
		})
	}
}

// After a restore the relay refused (progress past the head), handlers
// keep sealing segments that reuse the published numbers; clearing the
// refusal must publish every segment left, not take the old progress as
// covering the new ones.
func TestRelayClearedAfterARestorePublishesEverySegmentLeft(t *testing.T) {
	t.Parallel()
	f := newRelayFixture(t, 1000)
	f.publishAll(t, 1, "a", "b", "c")
	f.exec(t, `UPDATE leasehold.outbox_heads SET next_seq = 2`) // the restore
	f.add(t, "r1")
	f.refused(t, 2, "past the outbox's last segment")
	for _, v := range []string{"r2", "r3", "r4"} { // numbers 3, 4, 5, sealed while refused: past the old progress
		f.add(t, v)
	}
	_, err := ClearRefusal(f.ctx, f.db, "g", -1)
	pgtest.Must(t, err)
	f.publishAll(t, 3)
	if got, want := f.output(t, 7), []string{"a", "b", "c", "r1", "r2", "r3", "r4"}; !slices.Equal(got, want) {
		t.Fatalf("output %v, want %v", got, want)
	}
}

// A failover to a copy that lost the last published segment's commit: the
// next seal reuses its number, with other contents. The relay tells them
// apart by the scope its progress names, and refuses instead of taking
// the new segment for published.
func TestRelayRefusesAReusedSegmentNumber(t *testing.T) {
	t.Parallel()
	f := newRelayFixture(t, 1000)
	f.publishAll(t, 1, "a", "b")
	f.exec(t, `UPDATE leasehold.outbox_heads SET next_seq = 2`) // segment 2 lost
	f.add(t, "c")                                               // segment 2 again
	f.refused(t, 2, "other contents")
	if s, _ := f.left(t); s != 1 {
		t.Fatalf("%d segments left, want the new segment 2 kept", s)
	}
}

// The outbox's tables reset under a live producer (idle since its last
// publish): its next read notices and the grant reopens, which refuses the
// old progress instead of deleting the new segments under it.
func TestRelayNoticesAResetUnderALiveProducer(t *testing.T) {
	t.Parallel()
	f := newRelayFixture(t, 1000)
	f.add(t, "a")
	f.add(t, "b")
	f.add(t, "c")
	g := f.grant(1)
	defer g.closeProducer()
	pgtest.Must(t, g.drain(f.ctx)) // progress 3, producer kept
	f.exec(t, `TRUNCATE leasehold.outbox_heads, leasehold.outbox_segments, leasehold.outbox_records`)
	for _, v := range []string{"n1", "n2", "n3", "n4"} {
		f.add(t, v)
	}
	if err := g.drain(f.ctx); !errors.Is(err, errOutboxChanged) {
		t.Fatalf("drain with the live producer = %v, want errOutboxChanged", err)
	}
	g.closeProducer()
	f.refused(t, 2, "another outbox")
	if s, _ := f.left(t); s != 4 {
		t.Fatalf("%d segments left, want the 4 new ones kept", s)
	}
}
