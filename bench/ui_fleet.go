package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// uiPayload is the arguments of the suite's jobs, as seeded (about 200
// bytes of JSON). Batch items carry other fields, which decode to zero.
type uiPayload struct {
	Account   int      `json:"account"`
	To        string   `json:"to"`
	Template  string   `json:"template"`
	Locale    string   `json:"locale"`
	RequestID string   `json:"request_id"`
	Tags      []string `json:"tags"`
	Source    string   `json:"source"`
}

// uiArgs is a job of the kind K names.
type uiArgs[K uiKindName] struct{ uiPayload }

// Kind returns the kind K names.
func (uiArgs[K]) Kind() string {
	var k K
	return k.kind()
}

// uiKindName names a kind; its types are the kinds' markers.
type uiKindName interface{ kind() string }

type (
	kEmailSend      struct{}
	kWebhook        struct{}
	kDigest         struct{}
	kSMS            struct{}
	kPush           struct{}
	kUserSync       struct{}
	kInvoice        struct{}
	kReport         struct{}
	kAudit          struct{}
	kCacheWarm      struct{}
	kAccountPurge   struct{}
	kImportRow      struct{}
	uiHandler       func(ctx context.Context, group string, id int64, attempt int) error
	uiKindRegistrar func(ws *queue.Workers, h uiHandler)
)

func (kEmailSend) kind() string    { return "email.send" }
func (kWebhook) kind() string      { return "webhook.deliver" }
func (kDigest) kind() string       { return uiPausedKind }
func (kSMS) kind() string          { return "sms.send" }
func (kPush) kind() string         { return "push.send" }
func (kUserSync) kind() string     { return "user.sync" }
func (kInvoice) kind() string      { return "invoice.render" }
func (kReport) kind() string       { return "report.build" }
func (kAudit) kind() string        { return "audit.log" }
func (kCacheWarm) kind() string    { return "cache.warm" }
func (kAccountPurge) kind() string { return uiRareKind }
func (kImportRow) kind() string    { return uiItemKind }

// uiKind is one kind of the suite's jobs: upTo is the cumulative frequency
// (per 10,000 plain jobs) up to and including it; 0 for batch items.
type uiKind struct {
	name     string
	upTo     int
	register uiKindRegistrar
	args     func(p uiPayload) queue.Args
}

func kindOf[K uiKindName](upTo int) uiKind {
	var k K
	return uiKind{name: k.kind(), upTo: upTo,
		register: func(ws *queue.Workers, h uiHandler) {
			queue.Handle(ws, func(ctx context.Context, w *queue.Work[uiArgs[K]]) error {
				return h(ctx, w.Group, w.ID, w.Attempt)
			})
		},
		args: func(p uiPayload) queue.Args { return uiArgs[K]{p} }}
}

// uiKinds are the kinds, skewed: email.send 40%, down to the rare kind, 1
// in 10,000.
var uiKinds = []uiKind{
	kindOf[kEmailSend](4000),
	kindOf[kWebhook](5500),
	kindOf[kDigest](6500),
	kindOf[kSMS](7300),
	kindOf[kPush](8000),
	kindOf[kUserSync](8600),
	kindOf[kInvoice](9100),
	kindOf[kReport](9500),
	kindOf[kAudit](9800),
	kindOf[kCacheWarm](9999),
	kindOf[kAccountPurge](10000),
	kindOf[kImportRow](0),
}

// uiFleet is the workers owning the groups' partitions while the pages are
// measured, and the producer feeding them.
type uiFleet struct {
	workers  []*worker.Worker
	pools    []*pgxpool.Pool
	ran      atomic.Int64 // handler runs
	failed   atomic.Int64 // of which failed
	mu       sync.Mutex
	rnd      *rand.Rand
	stopFeed context.CancelFunc
	fed      sync.WaitGroup
	enqueued atomic.Int64
	feedErr  atomic.Pointer[error]
}

// uiFleetConcurrency is each worker's Concurrency: a small fleet of slow
// handlers (20 to 180 ms each, about 20 jobs/s per worker), so that the
// big batch burns down over the run rather than in a minute.
const uiFleetConcurrency = 2

// startFleet starts the workers of every group that has some, one after
// the other, each once the ones before own every partition of their group,
// so that partitions are handed off as each joins (the ownership pages'
// events); it returns once every group's partitions are owned.
func (b *uiBench) startFleet(ctx context.Context) (*uiFleet, error) {
	fl := &uiFleet{rnd: rand.New(rand.NewPCG(uint64(b.f.seed), 16))}
	ws := queue.NewWorkers()
	for _, k := range uiKinds {
		k.register(ws, fl.handle(b.f.failRate))
	}
	for _, g := range uiGroups {
		var gw []*worker.Worker
		for i := range g.workers {
			pool, err := newSystemPool(ctx, b.base, "ui-fleet-"+g.name, 6, nil, "")
			if err != nil {
				return fl, err
			}
			fl.pools = append(fl.pools, pool)
			db, err := lhDB(pool, "")
			if err != nil {
				return fl, err
			}
			w, err := worker.New(db, worker.Config{Group: g.name, Partitions: g.partitions,
				ID: g.name + "-worker-" + strconv.Itoa(i+1), Workers: ws, Concurrency: uiFleetConcurrency,
				Queue: queue.ProcessorConfig{Retention: 7 * 24 * time.Hour}})
			if err != nil {
				return fl, err
			}
			if err := w.Start(ctx); err != nil {
				return fl, err
			}
			fl.workers = append(fl.workers, w)
			gw = append(gw, w)
			if err := b.awaitOwned(ctx, g, gw); err != nil {
				return fl, err
			}
		}
	}
	return fl, nil
}

// awaitOwned waits until ws, the workers of g started so far, own all of
// g's partitions between them, each some.
func (b *uiBench) awaitOwned(ctx context.Context, g uiGroup, ws []*worker.Worker) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		total, each := 0, true
		for _, w := range ws {
			o := len(w.Owned())
			total += o
			each = each && o > 0
		}
		if total == g.partitions && each {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("group %s: %d workers own %d of %d partitions after 2 minutes", g.name, len(ws), total, g.partitions)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// handle returns the fleet's handler: it takes 20 to 180 ms, and fails with
// probability failRate, with one of the texts operators see.
func (fl *uiFleet) handle(failRate float64) uiHandler {
	return func(ctx context.Context, group string, id int64, attempt int) error {
		fl.mu.Lock()
		d := time.Duration(20+fl.rnd.IntN(161)) * time.Millisecond
		fail := fl.rnd.Float64() < failRate
		msg := uiErrors[fl.rnd.IntN(len(uiErrors))]
		fl.mu.Unlock()
		fl.ran.Add(1)
		if err := sleepCtx(ctx, d); err != nil {
			return err
		}
		if fail {
			fl.failed.Add(1)
			return errors.New(msg)
		}
		return nil
	}
}

// feed starts the producer: --trickle jobs a second, in 10 enqueues a
// second, spread over the groups and kinds as the seeded jobs, the
// paused kind excepted.
func (b *uiBench) feed(ctx context.Context, fl *uiFleet) {
	ctx, fl.stopFeed = context.WithCancel(ctx)
	if b.f.trickle == 0 {
		return
	}
	fl.fed.Go(func() {
		rnd := rand.New(rand.NewPCG(uint64(b.f.seed), 17))
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		owed := 0.0
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			owed += float64(b.f.trickle) / 10
			var jobs []queue.Job
			for ; owed >= 1; owed-- {
				jobs = append(jobs, b.trickleJob(rnd))
			}
			if len(jobs) == 0 {
				continue
			}
			if _, err := b.app.EnqueueMany(ctx, jobs...); err != nil {
				if ctx.Err() == nil {
					fl.feedErr.Store(&err)
				}
				return
			}
			fl.enqueued.Add(int64(len(jobs)))
		}
	})
}

// trickleJob returns a new job for the fleet: a group with workers, a
// kind by the seeded frequencies (not the paused one), keyed as seeded.
func (b *uiBench) trickleJob(rnd *rand.Rand) queue.Job {
	g := uiGroups[0].name
	if rnd.IntN(uiGroups[0].share+uiGroups[1].share) >= uiGroups[0].share {
		g = uiGroups[1].name
	}
	k := uiKinds[0]
	for {
		u := rnd.IntN(10000)
		for _, c := range uiKinds {
			if u < c.upTo {
				k = c
				break
			}
		}
		if k.name != uiPausedKind {
			break
		}
	}
	acct := int(float64(b.f.keys) * rnd.Float64() * rnd.Float64())
	j := queue.Job{Group: g, Key: uiKey(acct), Args: k.args(uiPayload{Account: acct, To: "user" + strconv.Itoa(acct) + "@example.com",
		Template: "receipt-v12", Locale: "en-GB", RequestID: strconv.FormatUint(rnd.Uint64(), 16), Tags: []string{"tier-1", "eu-west-1"},
		Source: "api/v2/jobs"})}
	if rnd.IntN(10) < 2 {
		j.Key = ""
	}
	return j
}

// stop stops the producer, then the workers (gracefully), then closes
// their pools.
func (fl *uiFleet) stop(ctx context.Context) error {
	if fl.stopFeed != nil {
		fl.stopFeed()
	}
	fl.fed.Wait()
	var errs []error
	if p := fl.feedErr.Load(); p != nil {
		errs = append(errs, fmt.Errorf("producer: %w", *p))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, w := range fl.workers {
		if err := w.Stop(sctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", w.ID(), err))
		}
	}
	for _, p := range fl.pools {
		p.Close()
	}
	return errors.Join(errs...)
}
