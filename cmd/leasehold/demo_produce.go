package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// producer enqueues the demo's deposits over demoAccounts accounts, each
// account's jobs numbered in enqueue order.
type producer struct {
	client *queue.Client

	mu   sync.Mutex // serialises enqueues, so that seq order is id order
	made int
	seq  map[string]int

	total    atomic.Int64 // jobs planned
	enqueued atomic.Int64 // jobs enqueued
	amount   atomic.Int64 // sum of the amounts enqueued
}

func newProducer(client *queue.Client, total int) *producer {
	p := &producer{client: client, seq: make(map[string]int)}
	p.total.Store(int64(total))
	return p
}

func account(i int) string { return fmt.Sprintf("acct-%03d", i%demoAccounts) }

// enqueue enqueues one deposit for each account given.
func (p *producer) enqueue(ctx context.Context, accounts []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	jobs := make([]queue.Job, len(accounts))
	var sum int64
	for i, a := range accounts {
		amount := int64(1 + (p.made*37)%100)
		p.made++
		jobs[i] = queue.Job{Group: demoGroup, Key: a, Args: deposit{Seq: p.seq[a], Amount: amount}}
		p.seq[a]++
		sum += amount
	}
	res, err := p.client.EnqueueMany(ctx, jobs...)
	if err != nil {
		return fmt.Errorf("demo: enqueue: %w", err)
	}
	for _, r := range res {
		if r.ID == 0 || r.Duplicate {
			return fmt.Errorf("demo: enqueue: job not enqueued: %+v", r)
		}
	}
	p.enqueued.Add(int64(len(res)))
	p.amount.Add(sum)
	return nil
}

// run enqueues the planned jobs in small batches spread over d.
func (p *producer) run(ctx context.Context, d time.Duration) error {
	const batches = 40
	total := int(p.total.Load())
	t := time.NewTicker(d / batches)
	defer t.Stop()
	for i := 0; i < total; {
		n := min(total-i, (total+batches-1)/batches)
		accounts := make([]string, n)
		for j := range accounts {
			accounts[j] = account(i + j)
		}
		if err := p.enqueue(ctx, accounts); err != nil {
			return err
		}
		i += n
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
	return nil
}

// topUp enqueues, beyond the plan, a deposit to an account of each of the
// partitions given.
func (p *producer) topUp(ctx context.Context, parts []int) error {
	var accounts []string
	for _, part := range parts {
		for i := range demoAccounts {
			if a := account(i); partition.OfString(a, demoPartitions) == part {
				accounts = append(accounts, a)
				break
			}
		}
	}
	if len(accounts) == 0 {
		return nil
	}
	p.total.Add(int64(len(accounts)))
	return p.enqueue(ctx, accounts)
}
