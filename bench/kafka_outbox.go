package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/outbox"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// The outbox cases measure kafka.Relay as users run it: a worker.Worker
// (worker.Config.Relay) whose queue jobs' transactional handlers
// (queue.HandleTx) each append one record with outbox.Add, the relay
// publishing the group's outbox into a topic of the case's own. The peers
// are bare franz-go transactional producers publishing the same records
// (same keys, values, headers and records per Kafka transaction) from
// memory: one per group partition, as the relay has, and one in all.
//
// outbox (backlog): every round the backlog is appended first, untimed, by
// a worker without a relay (one job, so one handler transaction and one
// outbox segment, per record); then a worker with the relay starts, and
// the drain is timed from its first lease grant until a read_committed
// consumer has read the last record. The bare producers are timed from
// their clients' creation.
//
// outbox-trickle: jobs are enqueued at a steady rate well below capacity
// into a running worker with its relay; each record's latency is from the
// COMMIT of the handler transaction that appended it (its reply, seen by a
// pgx tracer on the worker's pool) until the consumer read it. The bare
// producers get the records at the same rate and publish what has arrived
// (up to a transaction's size) in each transaction; their latency is from
// a record's arrival.

const (
	caseOutbox        = "outbox"         // a backlog appended by handlers, then drained
	caseOutboxTrickle = "outbox-trickle" // a steady trickle well below capacity

	sysRelay = "relay"          // kafka.Relay run by a worker.Worker
	sysTxn   = "franz-go-txn"   // bare transactional producers, one per group partition
	sysTxn1  = "franz-go-txn-1" // one bare transactional producer
)

// outboxTarget is the relay's throughput target over the bare producers,
// one per partition (issue 28).
const outboxTarget = 0.7

// outboxKeys is how many distinct record keys there are.
const outboxKeys = 10000

// outboxValue is every record's value: 100 bytes, as the suite's input
// records.
var outboxValue = []byte(strings.Repeat("o", 100))

// outboxJob is the outbox cases' job: its handler appends record N.
type outboxJob struct {
	N int `json:"n"`
}

func (outboxJob) Kind() string { return "bench_outbox" }

func outboxKey(n int) []byte { return fmt.Appendf(nil, "k%d", n%outboxKeys) }

// outboxRecord is record n as a handler appends it.
func outboxRecord(topic string, n int) outbox.Record {
	return outbox.Record{Topic: topic, Key: outboxKey(n), Value: outboxValue,
		Headers: []outbox.Header{{Key: "n", Value: strconv.AppendInt(nil, int64(n), 10)}}}
}

// bareRecord is record n as the bare producers publish it: the same.
func bareRecord(topic string, n int) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: outboxKey(n), Value: outboxValue,
		Headers: []kgo.RecordHeader{{Key: "n", Value: strconv.AppendInt(nil, int64(n), 10)}}}
}

// outboxBench is the outbox cases' state.
type outboxBench struct {
	pool   *pgxpool.Pool // the workers' pool (traced by tracer; the queue's clone is too)
	client *queue.Client // enqueues, on a pool of its own
	tracer *commitTracer
	schema string
	names  map[string]string // the outbox statements' names, by normSQL text
	txn    int               // records per Kafka transaction: the relay's MaxRecords
	fill   *outboxFill       // the round's backlog

	mu   sync.Mutex
	runs map[[2]string][]outboxRun // by system and case, one per round
}

// outboxRun is what one measurement of an outbox case saw besides its
// sample.
type outboxRun struct {
	Records int `json:"records"`
	// Txns is how many Kafka transactions published them.
	Txns int64 `json:"kafka_transactions"`
	// Requests is how many requests the producers sent to Kafka (the
	// relay's: every client it opens).
	Requests int64 `json:"kafka_requests"`
	// Stmts are the statements in the bench database over the timed
	// window (relay only), by name (head, read, read-segment, delete:
	// the relay's; append, seal: the handlers'; all: every statement).
	Stmts outboxStmts `json:"statements,omitempty"`
	// Idle is the idle window after the trickle (relay only).
	Idle *outboxIdle `json:"idle,omitempty"`
	// FillRate is the backlog's append rate, jobs/s (outbox, relay only;
	// untimed).
	FillRate float64 `json:"fill_jobs_per_sec,omitempty"`
	// Early counts trickle records read before their commit was seen
	// (latency taken as 0).
	Early int `json:"early,omitempty"`
	// ServerCPUus and ClientCPUus are the CPU time, in µs per record, of
	// the PostgreSQL server's processes and of this process (the relay or
	// the bare producers, the in-process broker, the consumer) over the
	// backlog's timed window (0: not measured).
	ServerCPUus float64 `json:"server_cpu_us_per_record,omitempty"`
	ClientCPUus float64 `json:"client_cpu_us_per_record,omitempty"`
}

// cpuMeter measures the server's and this process's CPU time over a window.
type cpuMeter struct {
	pm     int
	server time.Duration
	client time.Duration
}

func (b *kafkaBench) startCPU() cpuMeter {
	return cpuMeter{pm: b.postmaster, server: readServerUsage(b.postmaster).cpu, client: processCPU()}
}

// perRecord returns the server's and this process's CPU µs per record
// since m started.
func (m cpuMeter) perRecord(n int) (server, client float64) {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	if m.pm != 0 {
		server = us(readServerUsage(m.pm).cpu - m.server)
	}
	return server, us(processCPU() - m.client)
}

// outboxIdle is what the relay's worker did in the idle window.
type outboxIdle struct {
	Seconds  float64     `json:"seconds"`
	Stmts    outboxStmts `json:"statements,omitempty"`
	Requests int64       `json:"relay_kafka_requests"`
}

// stmtCount is pg_stat_statements' calls, rows and execution time.
type stmtCount struct {
	Calls int64   `json:"calls"`
	Rows  int64   `json:"rows"`
	Ms    float64 `json:"exec_ms"`
}

// outboxStmts are statement counts by name.
type outboxStmts map[string]stmtCount

// relayStatements name the relay's statements (refuse and adopted run
// only when the progress in Kafka does not belong to the outbox).
var relayStatements = []string{"head", "read", "read-segment", "delete", "refuse", "adopted"}

// relay sums the relay's statements.
func (s outboxStmts) relay() stmtCount {
	var c stmtCount
	for _, n := range relayStatements {
		c.Calls += s[n].Calls
		c.Rows += s[n].Rows
		c.Ms += s[n].Ms
	}
	return c
}

// sqlConstant matches what pg_stat_statements replaces by a parameter in
// the text it keeps (numbers, strings, booleans), and the parameters.
var sqlConstant = regexp.MustCompile(`\$\d+|'(?:[^']|'')*'|\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b|(?i:\btrue\b|\bfalse\b)`)

// normSQL returns q with its constants and parameters replaced by "?" and
// its whitespace collapsed: a statement as sent and as pg_stat_statements
// keeps it normalise alike.
func normSQL(q string) string {
	q = sqlExtract.ReplaceAllString(q, "extract(? FROM")
	return strings.Join(strings.Fields(sqlConstant.ReplaceAllString(q, "?")), " ")
}

// sqlExtract matches extract's field, a constant to pg_stat_statements
// (extract(epoch FROM ...) is kept as extract($5 FROM ...)).
var sqlExtract = regexp.MustCompile(`(?i)extract\(\s*(?:\$\d+|\w+)\s+FROM`)

// outboxNames maps each outbox statement of internal/store, normalised,
// to its name: its store.OutboxSQL field in lower case, words joined by
// "-" (ReadSegment: "read-segment").
func outboxNames(o store.OutboxSQL) map[string]string {
	names := map[string]string{}
	v := reflect.ValueOf(o)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.String {
			continue
		}
		var name []rune
		for j, r := range f.Name {
			if unicode.IsUpper(r) && j > 0 {
				name = append(name, '-')
			}
			name = append(name, unicode.ToLower(r))
		}
		names[normSQL(v.Field(i).String())] = string(name)
	}
	return names
}

// openOutbox opens the outbox cases' pools and client.
func (b *kafkaBench) openOutbox(ctx context.Context, base *pgxpool.Config, push func(func())) error {
	ob := &outboxBench{tracer: &commitTracer{pending: map[*pgx.Conn][]int{}}, runs: map[[2]string][]outboxRun{}}
	c := base.Copy()
	c.MaxConns = int32(b.f.partitions)
	c.ConnConfig.Tracer = ob.tracer
	p, err := pgxpool.NewWithConfig(ctx, c)
	if err != nil {
		return err
	}
	push(p.Close)
	ob.pool = p
	c = base.Copy()
	c.MaxConns = 4
	pp, err := pgxpool.NewWithConfig(ctx, c)
	if err != nil {
		return err
	}
	push(pp.Close)
	db, err := lhDB(pp, "")
	if err != nil {
		return err
	}
	if ob.client, err = queue.New(db, queue.Config{}); err != nil {
		return err
	}
	st, err := store.For("")
	if err != nil {
		return err
	}
	ob.schema = st.Schema
	ob.names = outboxNames(st.Outbox)
	b.ob = ob
	if b.f.outboxStats == "none" {
		// Never analyzed: autovacuum off for the outbox tables from the
		// start (ANALYZE of an empty table keeps no column statistics).
		if err := b.outboxDDL(ctx, "ALTER TABLE %s SET (autovacuum_enabled = false)"); err != nil {
			return err
		}
	}
	// The relay's MaxRecords with its default filled in (no I/O).
	r, err := kafka.NewRelay(db, kafka.RelayConfig{Brokers: []string{"unused:9092"}, MaxRecords: b.f.outboxMaxRecords})
	if err != nil {
		return err
	}
	ob.txn = r.Config().MaxRecords
	b.ob = ob
	return nil
}

func (ob *outboxBench) record(sys, c string, r outboxRun) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	k := [2]string{sys, c}
	ob.runs[k] = append(ob.runs[k], r)
}

// commitTracer is a pgx tracer on the workers' pool: it stamps the
// records a handler appended (appended) with the time its transaction's
// COMMIT returned, while tracking.
type commitTracer struct {
	mu      sync.Mutex
	pending map[*pgx.Conn][]int // records appended in the connection's open transaction
	at      []time.Time         // commit time by record; nil: not tracking
}

type txEndKey struct{}

func (t *commitTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.EqualFold(d.SQL, "commit") || strings.EqualFold(d.SQL, "rollback") {
		return context.WithValue(ctx, txEndKey{}, true)
	}
	return ctx
}

func (t *commitTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryEndData) {
	tag := d.CommandTag.String()
	if ctx.Value(txEndKey{}) == nil && tag != "COMMIT" && tag != "ROLLBACK" {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	ns, ok := t.pending[conn]
	if !ok {
		return
	}
	delete(t.pending, conn)
	if d.Err != nil || tag != "COMMIT" || t.at == nil {
		return
	}
	for _, n := range ns {
		if n < len(t.at) {
			t.at[n] = now
		}
	}
}

// appended notes that record n was appended in conn's open transaction.
func (t *commitTracer) appended(conn *pgx.Conn, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at != nil {
		t.pending[conn] = append(t.pending[conn], n)
	}
}

// track starts stamping records 0..n-1.
func (t *commitTracer) track(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.at = make([]time.Time, n)
	clear(t.pending)
}

// stop stops tracking and returns the commit times.
func (t *commitTracer) stop() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := t.at
	t.at = nil
	clear(t.pending)
	return at
}

// requestCounter counts the requests a franz-go client writes.
type requestCounter struct{ n atomic.Int64 }

func (c *requestCounter) OnBrokerWrite(kgo.BrokerMetadata, int16, int, time.Duration, time.Duration, error) {
	c.n.Add(1)
}

// fetchSent calls itself when a client has written a fetch request.
type fetchSent func()

func (f fetchSent) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 1 && err == nil { // Fetch
		f()
	}
}

// watcher reads an output topic with read_committed isolation and notes
// when each record became visible.
type watcher struct {
	cl      *kgo.Client
	want    int
	cancel  context.CancelFunc
	stopped chan struct{}
	closed  sync.Once
	all     chan struct{} // closed when every record was read

	mu    sync.Mutex
	seen  []time.Time
	count int
	dups  int
	bad   error
	last  time.Time
}

// watch starts reading topic, expecting records 0..want-1, and returns once
// its first fetch is out.
func (b *kafkaBench) watch(ctx context.Context, topic string, want int) (*watcher, error) {
	w := &watcher{want: want, seen: make([]time.Time, want), stopped: make(chan struct{}), all: make(chan struct{})}
	ready := make(chan struct{})
	var once sync.Once
	offs := map[int32]kgo.Offset{}
	for p := range b.f.partitions {
		offs[int32(p)] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.WithHooks(fetchSent(func() { once.Do(func() { close(ready) }) })))
	if err != nil {
		return nil, err
	}
	w.cl = cl
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	go w.run(rctx)
	select {
	case <-ready:
		return w, nil
	case <-ctx.Done():
		w.close()
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		w.close()
		return nil, errors.New("the output consumer sent no fetch in 10s")
	}
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.stopped)
	for {
		fs := w.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		fs.EachError(func(t string, p int32, err error) {
			w.mu.Lock()
			w.fail(fmt.Errorf("fetch %s/%d: %w", t, p, err))
			w.mu.Unlock()
		})
		fs.EachRecord(func(r *kgo.Record) { w.add(r, now) })
	}
}

func (w *watcher) fail(err error) {
	if w.bad == nil {
		w.bad = err
	}
}

func (w *watcher) add(r *kgo.Record, now time.Time) {
	n := -1
	for _, h := range r.Headers {
		if h.Key == "n" {
			if v, err := strconv.Atoi(string(h.Value)); err == nil {
				n = v
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case n < 0 || n >= w.want:
		w.fail(fmt.Errorf("unexpected record: key %q, headers %v", r.Key, r.Headers))
	case !bytes.Equal(r.Key, outboxKey(n)) || !bytes.Equal(r.Value, outboxValue):
		w.fail(fmt.Errorf("record %d: key %q, %d-byte value: not what was appended", n, r.Key, len(r.Value)))
	case !w.seen[n].IsZero():
		w.dups++
	default:
		w.seen[n] = now
		w.count++
		w.last = now
		if w.count == w.want {
			close(w.all)
		}
	}
}

// reached waits until at least k records were read.
func (w *watcher) reached(ctx context.Context, k int) error {
	for {
		w.mu.Lock()
		count, bad := w.count, w.bad
		w.mu.Unlock()
		switch {
		case bad != nil:
			return bad
		case count >= k:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d records visible: %w", count, k, ctx.Err())
		case <-w.all:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// wait waits until every record was read and returns when the last was.
func (w *watcher) wait(ctx context.Context) (time.Time, error) {
	select {
	case <-w.all:
	case <-ctx.Done():
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.bad != nil {
			return time.Time{}, w.bad
		}
		return time.Time{}, fmt.Errorf("%d of %d records visible: %w", w.count, w.want, ctx.Err())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.bad
}

// finish reads on for settle (a duplicate published late would show),
// stops, and returns an error for a duplicate or an unexpected record.
func (w *watcher) finish(settle time.Duration) error {
	time.Sleep(settle)
	w.close()
	return w.verdict()
}

// verdict returns an error for a duplicate, an unexpected or a missing
// record.
func (w *watcher) verdict() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.bad != nil {
		return w.bad
	}
	if w.dups > 0 {
		return fmt.Errorf("%d records read more than once (of %d)", w.dups, w.want)
	}
	if w.count != w.want {
		return fmt.Errorf("%d of %d records read", w.count, w.want)
	}
	return nil
}

func (w *watcher) close() {
	w.closed.Do(func() {
		w.cancel()
		<-w.stopped
		w.cl.Close()
	})
}

// visible returns when record n was read.
func (w *watcher) visible(n int) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[n]
}

// settle is how long a watcher reads on after the last record.
const settle = 300 * time.Millisecond

// outboxFill is a round's backlog, appended to the outbox of group.
type outboxFill struct {
	group, topic string
	parts        []int // the group partition of record n's job
	rate         float64
}

// outboxFill appends the round's backlog: --outbox-records jobs, each
// appending one record, run by a worker without a relay. Untimed.
func (b *kafkaBench) outboxFill(ctx context.Context) error {
	b.seq++
	f := &outboxFill{group: fmt.Sprintf("bench-outbox-%d", b.seq), topic: fmt.Sprintf("%s-out-%d", b.topic, b.seq)}
	n := b.f.outboxRecords
	if err := createTopic(ctx, b.brokers, f.topic, int32(b.f.partitions)); err != nil {
		return err
	}
	if _, err := b.ob.client.EnsureGroup(ctx, f.group, b.f.partitions); err != nil {
		return err
	}
	if b.f.outboxStats == "none" {
		// The tables as fresh ones: the dead rows of earlier rounds
		// vacuumed (no autovacuum in this mode), so that the planner's
		// size estimate starts from an empty table each round; VACUUM
		// leaves the column statistics alone (there are none).
		if err := b.outboxDDL(ctx, "VACUUM %s"); err != nil {
			return err
		}
	}
	f.parts = make([]int, n)
	for first := 0; first < n; first += 1000 {
		jobs := make([]queue.Job, min(1000, n-first))
		for k := range jobs {
			jobs[k] = queue.Job{Group: f.group, Args: outboxJob{N: first + k}}
		}
		out, err := b.ob.client.EnqueueMany(ctx, jobs...)
		if err != nil {
			return err
		}
		for k, e := range out {
			f.parts[first+k] = e.Partition
		}
	}
	var done atomic.Int64
	finished := make(chan struct{})
	start := time.Now()
	w, err := b.outboxWorker(ctx, f.group, "fill", f.topic, nil, func(ev queue.JobEvent) {
		if ev.Outcome == queue.OutcomeCompleted && done.Add(1) == int64(n) {
			close(finished)
		}
	}, nil)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	select {
	case <-finished:
	case <-fctx.Done():
		stopWorker(w)
		return fmt.Errorf("%d of %d jobs done: %w", done.Load(), n, fctx.Err())
	}
	f.rate = float64(n) / time.Since(start).Seconds()
	stopWorker(w)
	var recs int64
	if err := b.ctl.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(sum(records), 0) FROM %s.outbox_segments WHERE group_name = $1`,
		quoteIdent(b.ob.schema)), f.group).Scan(&recs); err != nil {
		return err
	}
	if recs != int64(n) {
		return fmt.Errorf("the outbox holds %d records after the fill, want %d", recs, n)
	}
	if b.f.outboxStats == "analyze" {
		if err := b.outboxDDL(ctx, "ANALYZE %s"); err != nil {
			return err
		}
	}
	fmt.Fprintf(b.stderr, "  outbox backlog: %d records appended by %d jobs at %.0f jobs/s (untimed)\n", n, n, f.rate)
	b.ob.fill = f
	return nil
}

// outboxDDL runs each statement (a format with one %s) on each outbox
// table.
func (b *kafkaBench) outboxDDL(ctx context.Context, stmts ...string) error {
	for _, st := range stmts {
		for _, t := range []string{"outbox_heads", "outbox_segments", "outbox_records"} {
			if _, err := b.ctl.Exec(ctx, fmt.Sprintf(st, quoteIdent(b.ob.schema)+"."+t)); err != nil {
				return err
			}
		}
	}
	return nil
}

// outboxWorker starts a worker of group whose HandleTx handler appends
// record N of each job to topic, with relay (nil: none), onJob as its
// queue's OnJob hook and onGrant called at each lease grant.
func (b *kafkaBench) outboxWorker(ctx context.Context, group, id, topic string, relay *kafka.Relay,
	onJob func(queue.JobEvent), onGrant func()) (*worker.Worker, error) {
	db, err := lhDB(b.ob.pool, "")
	if err != nil {
		return nil, err
	}
	ws := queue.NewWorkers()
	tr := b.ob.tracer
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[outboxJob]) error {
		if err := outbox.Add(ctx, tx, outboxRecord(topic, w.Args.N)); err != nil {
			return err
		}
		tr.appended(tx.Conn(), w.Args.N)
		return nil
	})
	cfg := worker.Config{Group: group, Partitions: b.f.partitions, ID: id, Workers: ws, Relay: relay}
	cfg.Queue.Hooks.OnJob = onJob
	if onGrant != nil {
		cfg.Lease.Hooks.OnAcquire = func(ev lease.AcquireEvent) {
			if len(ev.Granted) > 0 {
				onGrant()
			}
		}
	}
	w, err := worker.New(db, cfg)
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

func stopWorker(w *worker.Worker) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.Stop(ctx)
}

// newRelay returns a relay at its defaults but for MaxRecords
// (--outbox-max-records) and a hook counting its Kafka requests.
func (b *kafkaBench) newRelay(reqs *requestCounter) (*kafka.Relay, error) {
	db, err := lhDB(b.ob.pool, "")
	if err != nil {
		return nil, err
	}
	return kafka.NewRelay(db, kafka.RelayConfig{Brokers: b.brokers, MaxRecords: b.f.outboxMaxRecords,
		ClientOptions: []kgo.Opt{kgo.WithHooks(reqs)}})
}

// relayed waits until relay has published n records and every partition's
// last read found nothing left (so what it published is deleted).
func relayed(ctx context.Context, relay *kafka.Relay, n int) error {
	for {
		st := relay.Stats()
		idle := st.Records >= int64(n)
		for _, p := range st.Partitions {
			idle = idle && p.Pending == 0
		}
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("relay: %d of %d records published: %w", st.Records, n, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// outboxEmpty checks that group's outbox is empty (waiting a little).
func (b *kafkaBench) outboxEmpty(ctx context.Context, group string) error {
	q := fmt.Sprintf(`SELECT (SELECT count(*) FROM %[1]s.outbox_segments WHERE group_name = $1),
		(SELECT count(*) FROM %[1]s.outbox_records WHERE group_name = $1)`, quoteIdent(b.ob.schema))
	deadline := time.Now().Add(10 * time.Second)
	for {
		var segs, recs int64
		if err := b.ctl.QueryRow(ctx, q, group).Scan(&segs, &recs); err != nil {
			return err
		}
		if segs == 0 && recs == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the outbox of %s still holds %d segments, %d records", group, segs, recs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// resetStatements empties pg_stat_statements, when loaded.
func (b *kafkaBench) resetStatements(ctx context.Context) error {
	if !b.statements {
		return nil
	}
	_, err := b.stats.Exec(ctx, "SELECT pg_stat_statements_reset()")
	return err
}

// readStatements returns the bench database's outbox statements since the
// last reset, by name, and under "all" every statement; nil without
// pg_stat_statements.
func (b *kafkaBench) readStatements(ctx context.Context) (outboxStmts, error) {
	if !b.statements {
		return nil, nil
	}
	rows, err := b.stats.Query(ctx, `SELECT query, calls, rows, total_exec_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`, b.dbName)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := outboxStmts{}
	for rows.Next() {
		var q string
		var c stmtCount
		if err := rows.Scan(&q, &c.Calls, &c.Rows, &c.Ms); err != nil {
			return nil, err
		}
		for _, name := range []string{b.ob.names[normSQL(q)], "all"} {
			if name != "" {
				t := out[name]
				t.Calls += c.Calls
				t.Rows += c.Rows
				t.Ms += c.Ms
				out[name] = t
			}
		}
	}
	return out, rows.Err()
}

// latencies returns the sorted durations from from(n) to record n's
// visibility, for n in 0..count-1; early counts the negative ones, taken
// as 0.
func (w *watcher) latencies(count int, from func(n int) time.Time) (lat []time.Duration, early int) {
	lat = make([]time.Duration, count)
	w.mu.Lock()
	defer w.mu.Unlock()
	for n := range count {
		d := w.seen[n].Sub(from(n))
		if d < 0 {
			early++
			d = 0
		}
		lat[n] = d
	}
	slices.Sort(lat)
	return lat, early
}

// outboxTopic creates a fresh output topic.
func (b *kafkaBench) outboxTopic(ctx context.Context) (string, error) {
	topic := fmt.Sprintf("%s-out-%d", b.topic, b.seq)
	return topic, createTopic(ctx, b.brokers, topic, int32(b.f.partitions))
}

// relayBacklog drains the round's backlog with a worker running the relay.
func (b *kafkaBench) relayBacklog(ctx context.Context) (sample, error) {
	f := b.ob.fill
	if f == nil || f.group == "" {
		return sample{}, errors.New("no backlog to drain (the round's fill did not run)")
	}
	b.ob.fill = &outboxFill{parts: f.parts} // drained: the bare producers still use its partitions
	defer deleteTopic(b.brokers, f.topic)
	n := b.f.outboxRecords
	w8, err := b.watch(ctx, f.topic, n)
	if err != nil {
		return sample{}, err
	}
	defer w8.close()
	reqs := &requestCounter{}
	relay, err := b.newRelay(reqs)
	if err != nil {
		return sample{}, err
	}
	if err := b.resetStatements(ctx); err != nil {
		return sample{}, err
	}
	var first atomic.Int64 // the first grant, unix ns
	cpu := b.startCPU()
	w, err := b.outboxWorker(ctx, f.group, "relay", f.topic, relay, nil, func() { first.CompareAndSwap(0, time.Now().UnixNano()) })
	if err != nil {
		return sample{}, err
	}
	defer stopWorker(w)
	last, err := w8.wait(ctx)
	if err != nil {
		return sample{}, err
	}
	if err := relayed(ctx, relay, n); err != nil {
		return sample{}, err
	}
	serverCPU, clientCPU := cpu.perRecord(n)
	stmts, err := b.readStatements(ctx)
	if err != nil {
		return sample{}, err
	}
	if err := w8.finish(settle); err != nil {
		return sample{}, err
	}
	if err := b.outboxEmpty(ctx, f.group); err != nil {
		return sample{}, err
	}
	st := relay.Stats()
	if st.Records != int64(n) || st.Fenced+st.Failed > 0 {
		return sample{}, fmt.Errorf("relay: %d records published (want %d), %d publishes fenced, %d failed", st.Records, n, st.Fenced, st.Failed)
	}
	if first.Load() == 0 {
		return sample{}, errors.New("no lease grant seen")
	}
	t0 := time.Unix(0, first.Load())
	lat, _ := w8.latencies(n, func(int) time.Time { return t0 })
	b.ob.record(sysRelay, caseOutbox, outboxRun{Records: n, Txns: st.Transactions, Requests: reqs.n.Load(), Stmts: stmts, FillRate: f.rate,
		ServerCPUus: serverCPU, ClientCPUus: clientCPU})
	return sample{ops: n, elapsed: last.Sub(t0), lat: lat}, nil
}

// txnProducer is a bare transactional producer.
type txnProducer struct {
	cl   *kgo.Client
	txns int
}

// newTxnProducer opens and initialises (InitProducerID) a transactional
// producer, as the relay does for a partition.
func (b *kafkaBench) newTxnProducer(ctx context.Context, id string, reqs *requestCounter) (*txnProducer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.TransactionalID(id), kgo.WithHooks(reqs))
	if err != nil {
		return nil, err
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	return &txnProducer{cl: cl}, nil
}

// publish produces recs in one Kafka transaction, as the relay does (but
// for its progress commit).
func (p *txnProducer) publish(ctx context.Context, recs []*kgo.Record) error {
	if err := p.cl.BeginTransaction(); err != nil {
		return err
	}
	var mu sync.Mutex
	var first error
	for _, r := range recs {
		p.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	err := p.cl.Flush(ctx)
	mu.Lock()
	if first != nil {
		err = first
	}
	mu.Unlock()
	if err != nil {
		p.cl.AbortBufferedRecords(context.WithoutCancel(ctx))
		p.cl.EndTransaction(context.WithoutCancel(ctx), kgo.TryAbort)
		return err
	}
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return err
	}
	p.txns++
	return nil
}

// producersOf returns the producer (of producers) that publishes record
// n: its group partition's, as the relay.
func producersOf(parts []int, producers int) func(n int) int {
	return func(n int) int {
		if producers == 1 {
			return 0
		}
		return parts[n] % producers
	}
}

// bareBacklog publishes the backlog's records from memory with producers
// bare transactional producers (one per group partition, or one), timed
// from their creation until the last record is visible.
func (b *kafkaBench) bareBacklog(ctx context.Context, sys string, producers int) (sample, error) {
	n := b.f.outboxRecords
	parts := make([]int, n)
	if f := b.ob.fill; f != nil {
		copy(parts, f.parts)
	} else {
		for i := range parts {
			parts[i] = i % b.f.partitions
		}
	}
	topic, err := b.outboxTopic(ctx)
	if err != nil {
		return sample{}, err
	}
	defer deleteTopic(b.brokers, topic)
	lists := make([][]*kgo.Record, producers)
	of := producersOf(parts, producers)
	for i := range n {
		lists[of(i)] = append(lists[of(i)], bareRecord(topic, i))
	}
	w8, err := b.watch(ctx, topic, n)
	if err != nil {
		return sample{}, err
	}
	defer w8.close()
	reqs := &requestCounter{}
	var txns atomic.Int64
	cpu := b.startCPU()
	t0 := time.Now()
	errs := make(chan error, producers)
	for i, list := range lists {
		go func() {
			errs <- func() error {
				p, err := b.newTxnProducer(ctx, fmt.Sprintf("bench-bare-%d-%d", b.seq, i), reqs)
				if err != nil {
					return err
				}
				defer p.cl.Close()
				defer func() { txns.Add(int64(p.txns)) }()
				for len(list) > 0 {
					k := min(len(list), b.ob.txn)
					if err := p.publish(ctx, list[:k]); err != nil {
						return err
					}
					list = list[k:]
				}
				return nil
			}()
		}()
	}
	for range producers {
		if err := <-errs; err != nil {
			return sample{}, fmt.Errorf("%s: %w", sys, err)
		}
	}
	last, err := w8.wait(ctx)
	if err != nil {
		return sample{}, err
	}
	serverCPU, clientCPU := cpu.perRecord(n)
	if err := w8.finish(settle); err != nil {
		return sample{}, err
	}
	lat, _ := w8.latencies(n, func(int) time.Time { return t0 })
	b.ob.record(sys, caseOutbox, outboxRun{Records: n, Txns: txns.Load(), Requests: reqs.n.Load(),
		ServerCPUus: serverCPU, ClientCPUus: clientCPU})
	return sample{ops: n, elapsed: last.Sub(t0), lat: lat}, nil
}

// paced calls send(i) for i in 0..n-1, i due at i/rate seconds after the
// start, from senders goroutines taking the records in turn (so that one
// slow call does not delay the records due after it); a late record is
// sent at once.
func paced(ctx context.Context, n int, rate float64, senders int, send func(ctx context.Context, i int) error) error {
	start := time.Now()
	errs := make(chan error, senders)
	for k := range senders {
		go func() {
			errs <- func() error {
				for i := k; i < n; i += senders {
					due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
					if d := time.Until(due); d > 0 {
						select {
						case <-ctx.Done():
							return ctx.Err()
						case <-time.After(d):
						}
					}
					if err := send(ctx, i); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	var first error
	for range senders {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// relayTrickle enqueues the trickle's jobs at --outbox-rate into a running
// worker with the relay; each record's latency is from its handler
// transaction's commit until it is visible. Then the idle window.
func (b *kafkaBench) relayTrickle(ctx context.Context) (sample, error) {
	n := b.f.outboxTrickleRecords()
	warm := b.f.partitions // warm-up records n..n+warm-1: one per partition, untimed
	group := fmt.Sprintf("bench-outbox-%d", b.seq)
	topic, err := b.outboxTopic(ctx)
	if err != nil {
		return sample{}, err
	}
	defer deleteTopic(b.brokers, topic)
	if _, err := b.ob.client.EnsureGroup(ctx, group, b.f.partitions); err != nil {
		return sample{}, err
	}
	reqs := &requestCounter{}
	relay, err := b.newRelay(reqs)
	if err != nil {
		return sample{}, err
	}
	w, err := b.outboxWorker(ctx, group, "relay", topic, relay, nil, nil)
	if err != nil {
		return sample{}, err
	}
	defer stopWorker(w)
	for len(w.Owned()) < b.f.partitions || len(relay.Stats().Partitions) < b.f.partitions {
		select {
		case <-ctx.Done():
			return sample{}, fmt.Errorf("the worker owns %d of %d partitions: %w", len(w.Owned()), b.f.partitions, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	w8, err := b.watch(ctx, topic, n+warm)
	if err != nil {
		return sample{}, err
	}
	defer w8.close()
	enqueue := func(ctx context.Context, i int) error {
		_, err := b.ob.client.Enqueue(ctx, queue.Job{Group: group, Args: outboxJob{N: i}})
		return err
	}
	// Warm-up: a record through each partition (keyless jobs go round
	// robin), so that the relays' producers are open, as in a worker that
	// has been running.
	for i := n; i < n+warm; i++ {
		if err := enqueue(ctx, i); err != nil {
			return sample{}, err
		}
	}
	if err := w8.reached(ctx, warm); err != nil {
		return sample{}, err
	}
	if err := relayed(ctx, relay, warm); err != nil {
		return sample{}, err
	}
	b.ob.tracer.track(n)
	if err := b.resetStatements(ctx); err != nil {
		return sample{}, err
	}
	reqs0, txns0 := reqs.n.Load(), relay.Stats().Transactions
	if err := paced(ctx, n, b.f.outboxRate, 4, enqueue); err != nil {
		return sample{}, err
	}
	last, err := w8.wait(ctx)
	if err != nil {
		return sample{}, err
	}
	if err := relayed(ctx, relay, n+warm); err != nil {
		return sample{}, err
	}
	stmts, err := b.readStatements(ctx)
	if err != nil {
		return sample{}, err
	}
	run := outboxRun{Records: n, Txns: relay.Stats().Transactions - txns0, Requests: reqs.n.Load() - reqs0, Stmts: stmts}
	commits := b.ob.tracer.stop()
	if err := w8.finish(settle); err != nil {
		return sample{}, err
	}
	if err := b.outboxEmpty(ctx, group); err != nil {
		return sample{}, err
	}
	if b.f.outboxIdle > 0 {
		if err := b.resetStatements(ctx); err != nil {
			return sample{}, err
		}
		r0, t := reqs.n.Load(), time.Now()
		select {
		case <-ctx.Done():
			return sample{}, ctx.Err()
		case <-time.After(b.f.outboxIdle):
		}
		is, err := b.readStatements(ctx)
		if err != nil {
			return sample{}, err
		}
		run.Idle = &outboxIdle{Seconds: time.Since(t).Seconds(), Stmts: is, Requests: reqs.n.Load() - r0}
	}
	st := relay.Stats()
	if st.Records != int64(n+warm) || st.Fenced+st.Failed > 0 {
		return sample{}, fmt.Errorf("relay: %d records published (want %d), %d publishes fenced, %d failed", st.Records, n+warm, st.Fenced, st.Failed)
	}
	firstCommit := time.Time{}
	for i, c := range commits {
		if c.IsZero() {
			return sample{}, fmt.Errorf("record %d: its commit was not seen", i)
		}
		if firstCommit.IsZero() || c.Before(firstCommit) {
			firstCommit = c
		}
	}
	lat, early := w8.latencies(n, func(i int) time.Time { return commits[i] })
	run.Early = early
	b.ob.record(sysRelay, caseOutboxTrickle, run)
	return sample{ops: n, elapsed: last.Sub(firstCommit), lat: lat}, nil
}

// bareTrickle hands the trickle's records to producers bare transactional
// producers at --outbox-rate (record i to producer i mod producers: round
// robin, as keyless jobs over the partitions); each producer publishes
// what has arrived, up to a transaction's size, in each transaction.
// Latency is from a record's arrival until it is visible.
func (b *kafkaBench) bareTrickle(ctx context.Context, sys string, producers int) (sample, error) {
	n := b.f.outboxTrickleRecords()
	topic, err := b.outboxTopic(ctx)
	if err != nil {
		return sample{}, err
	}
	defer deleteTopic(b.brokers, topic)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = bareRecord(topic, i)
	}
	reqs := &requestCounter{}
	ps := make([]*txnProducer, producers)
	for i := range ps {
		p, err := b.newTxnProducer(ctx, fmt.Sprintf("bench-bare-%d-%d", b.seq, i), reqs)
		if err != nil {
			return sample{}, err
		}
		defer p.cl.Close()
		ps[i] = p
	}
	w8, err := b.watch(ctx, topic, n)
	if err != nil {
		return sample{}, err
	}
	defer w8.close()
	arrived := make([]time.Time, n)
	chans := make([]chan int, producers)
	errs := make(chan error, producers)
	for i, p := range ps {
		ch := make(chan int, n)
		chans[i] = ch
		go func() {
			errs <- func() error {
				for r := range ch {
					batch := []*kgo.Record{recs[r]}
				more:
					for len(batch) < b.ob.txn {
						select {
						case j, ok := <-ch:
							if !ok {
								break more
							}
							batch = append(batch, recs[j])
						default:
							break more
						}
					}
					if err := p.publish(ctx, batch); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	reqs0 := reqs.n.Load()
	err = paced(ctx, n, b.f.outboxRate, 1, func(_ context.Context, i int) error {
		arrived[i] = time.Now()
		chans[i%producers] <- i
		return nil
	})
	for _, ch := range chans {
		close(ch)
	}
	for range producers {
		if perr := <-errs; perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", sys, err)
	}
	last, err := w8.wait(ctx)
	if err != nil {
		return sample{}, err
	}
	if err := w8.finish(settle); err != nil {
		return sample{}, err
	}
	var txns int64
	for _, p := range ps {
		txns += int64(p.txns)
	}
	lat, _ := w8.latencies(n, func(i int) time.Time { return arrived[i] })
	b.ob.record(sys, caseOutboxTrickle, outboxRun{Records: n, Txns: txns, Requests: reqs.n.Load() - reqs0})
	return sample{ops: n, elapsed: last.Sub(arrived[0]), lat: lat}, nil
}

// outbox measures outbox case c on system sys.
func (b *kafkaBench) outbox(ctx context.Context, sys, c string) (sample, error) {
	producers := b.f.partitions
	if sys == sysTxn1 {
		producers = 1
	}
	switch {
	case c == caseOutbox && sys == sysRelay:
		return b.relayBacklog(ctx)
	case c == caseOutbox:
		return b.bareBacklog(ctx, sys, producers)
	case sys == sysRelay:
		return b.relayTrickle(ctx)
	default:
		return b.bareTrickle(ctx, sys, producers)
	}
}
