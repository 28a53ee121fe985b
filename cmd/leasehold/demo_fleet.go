package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/netproxy"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// deposit is the demo's job: deposit Amount into the job's account (its
// key). Seq numbers the account's jobs in enqueue order.
type deposit struct {
	Seq    int   `json:"seq"`
	Amount int64 `json:"amount"`
}

// Kind returns the job kind.
func (deposit) Kind() string { return "demo.deposit" }

// demoWorker is one worker of the demo's fleet, with what it takes to crash
// or freeze it: its own connection pool through a fault proxy, its own
// pausable clock and a gate its handlers pass through.
type demoWorker struct {
	name  string
	proxy *netproxy.Proxy
	pool  *pgxpool.Pool
	clock *pausableClock
	gate  *gate
	w     *worker.Worker
}

// runKey names one run of a job by one worker.
type runKey struct {
	worker  string
	job     int64
	attempt int
}

// runs records the demo workers' handler runs (their tokens) and the
// queue's outcomes of them (OnJob).
type runs struct {
	mu       sync.Mutex
	tokens   map[runKey]fence.Token // of each key's latest run
	outcomes map[runKey]queue.Outcome
	fenced   []fencedRun
}

// fencedRun is a run reported fenced, with its token.
type fencedRun struct {
	runKey
	token fence.Token
}

func newRuns() *runs {
	return &runs{tokens: make(map[runKey]fence.Token), outcomes: make(map[runKey]queue.Outcome)}
}

// ran records a run's token, before its outcome is known.
func (r *runs) ran(k runKey, tok fence.Token) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens[k] = tok
}

// outcome records a run's outcome. (A run that neither completes nor fails
// spends no attempt: the next run of the job by the same worker has the same
// key, so a fenced run's token is kept with it now.)
func (r *runs) outcome(k runKey, o queue.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[k] = o
	if o == queue.OutcomeFenced {
		r.fenced = append(r.fenced, fencedRun{k, r.tokens[k]})
	}
}

// outcomeOf returns the latest outcome of a run, if known.
func (r *runs) outcomeOf(k runKey) (queue.Outcome, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.outcomes[k]
	return o, ok
}

// fencedRuns returns the runs reported fenced.
func (r *runs) fencedRuns() []fencedRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]fencedRun(nil), r.fenced...)
}

// startWorker starts one worker of the fleet.
func (d *demo) startWorker(ctx context.Context, name string) (*demoWorker, error) {
	cfg, err := pgxpool.ParseConfig(d.url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	cc := cfg.ConnConfig
	if strings.HasPrefix(cc.Host, "/") {
		return nil, fmt.Errorf("demo: the workers connect through a TCP fault proxy; the database URL names a Unix socket (%s): use a TCP host", cc.Host)
	}
	proxy, err := netproxy.Start(net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
	if err != nil {
		return nil, fmt.Errorf("demo: fault proxy: %w", err)
	}
	if cc.TLSConfig != nil && cc.TLSConfig.ServerName == "" {
		cc.TLSConfig.ServerName = cc.Host
	}
	cc.Host, cc.Port, cc.Fallbacks = "127.0.0.1", uint16(proxy.Port()), nil
	cc.ConnectTimeout = time.Second
	cfg.MaxConns = demoPartitions + 4 // a handler per partition, the Listen, heartbeats and renewals
	dw := &demoWorker{name: name, proxy: proxy, clock: newPausableClock(), gate: newGate()}
	if dw.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		dw.close()
		return nil, fmt.Errorf("database URL: %w", err)
	}
	ws := queue.NewWorkers()
	queue.HandleTx(ws, d.handler(dw))
	wc := worker.Config{
		Group: demoGroup, Partitions: demoPartitions, ID: name,
		Workers: ws, Concurrency: demoPartitions, MembershipPollInterval: 200 * time.Millisecond,
		Lease: lease.Config{TTL: demoTTL, MaxBackoff: 250 * time.Millisecond, Clock: dw.clock.Clock},
		Queue: queue.ProcessorConfig{
			PollInterval: 100 * time.Millisecond, BatchSize: 20,
			// A frozen worker's transaction must survive the freeze, so
			// that its late commit meets the fence rather than a timeout.
			Fence: lease.FenceConfig{IdleTimeout: 30 * time.Second},
			Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) {
				d.runs.outcome(runKey{name, e.ID, e.Attempt}, e.Outcome)
			}},
		},
	}
	h, err := leasehold.Open(dw.pool, leasehold.Config{Schema: demoSchema, Logger: d.log})
	if err != nil {
		dw.close()
		return nil, err
	}
	if dw.w, err = worker.New(h, wc); err != nil {
		dw.close()
		return nil, err
	}
	if err := dw.w.Start(ctx); err != nil {
		dw.close()
		return nil, err
	}
	return dw, nil
}

// handler returns dw's handler: after a little pretend work, it inserts the
// deposit into the ledger inside the job's transaction (which commits only
// if the fence check passes), then passes dw's gate.
func (d *demo) handler(dw *demoWorker) func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
	insert := `INSERT INTO ` + d.schema + `.demo_ledger (job_id, account, seq, amount, partition, token, worker)
VALUES ($1, $2, $3, $4, $5, $6, $7)`
	return func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		time.Sleep(demoWork)
		d.runs.ran(runKey{dw.name, w.ID, w.Attempt}, w.Token)
		if _, err := tx.Exec(ctx, insert, w.ID, w.Key, w.Args.Seq, w.Args.Amount, w.Partition, int64(w.Token), dw.name); err != nil {
			return err
		}
		dw.gate.pass(heldRun{Job: w.ID, Attempt: w.Attempt, Partition: w.Partition, Token: w.Token})
		return nil
	}
}

// crash freezes the worker for good, as a crashed process: its clock stops,
// its handlers hang, and its connections are cut and refused.
func (dw *demoWorker) crash() {
	dw.clock.pause()
	dw.gate.close()
	dw.proxy.Cut()
}

// stop stops the worker: gracefully (within ctx), or, for a crashed
// worker, by releasing its resources only.
func (dw *demoWorker) stop(ctx context.Context, crashed bool) error {
	if !crashed {
		return dw.w.Stop(ctx)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	dw.gate.open()
	dw.clock.resume()
	if err := dw.w.Stop(cctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// close releases the worker's pool, proxy and clock. A pool whose
// connections are stuck is left to the process's exit after a while.
func (dw *demoWorker) close() {
	dw.gate.open()
	dw.proxy.Cut()
	if dw.pool != nil {
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			dw.pool.Close()
		}()
		select {
		case <-closed:
		case <-time.After(3 * time.Second):
		}
	}
	dw.proxy.Close()
	dw.clock.close()
}
