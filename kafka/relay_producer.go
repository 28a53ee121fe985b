package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
)

// producer is one partition's transactional producer, for one grant, and
// the progress it read from Kafka and advanced since.
type producer struct {
	cl       *kgo.Client
	id       string // the transactional id, also the consumer group of the progress
	topic    string // ProgressTopic
	topicID  [16]byte
	token    fence.Token
	progress int64  // the last segment published (0: none)
	owner    string // the outbox the progress was written for (its metadata)
	scope    int64  // the scope of the segment the progress names (its metadata)
	outbox   string // this outbox's identity, written with the progress
}

// progressMeta starts the metadata committed with the progress:
// "leasehold outbox <outbox id> scope <the last segment's scope> token
// <the grant's token>".
const progressMeta = "leasehold outbox "

// producerDefaults are the relay's producer options, before
// RelayConfig.ClientOptions (which may override them): franz-go's warnings
// to log; batches up to the brokers' default message.max.bytes, so that a
// record of outbox.MaxRecordBytes fits; and TxnOffsetCommit at version 4 at
// most, so that franz-go and the relay's own AddOffsetsToTxn stay in the
// classic transaction protocol, which every broker version accepts (a
// version above 4 is for brokers running transaction.version 2).
func producerDefaults(log kgo.Logger) []kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	return []kgo.Opt{kgo.WithLogger(log), kgo.ProducerBatchMaxBytes(1048588), kgo.MaxVersions(v)}
}

// mismatch says why the progress p read does not belong to the outbox
// whose head is h ("" if it does): written for another outbox; past the
// last segment numbered; or the segment it names, or one below it, left
// with other contents (its number reused after a restore or a failover
// that lost commits: the progress names the scope it published).
func (g *relayGrant) mismatch(ctx context.Context, p *producer, h head) (string, error) {
	switch {
	case p.progress == 0:
		return "", nil
	case p.owner != *h.id:
		return fmt.Sprintf("the progress committed in Kafka (segment %d, group %s) was written for another outbox (%q; this one is %s): "+
			"the outbox tables were reset, or another deployment publishes under the same TransactionalIDPrefix",
			p.progress, p.id, p.owner, *h.id), nil
	case p.progress > h.last:
		return fmt.Sprintf("the progress committed in Kafka (segment %d) is past the outbox's last segment (%d): "+
			"the database was restored from an older backup, or failed over to a copy that lost commits", p.progress, h.last), nil
	}
	var at *int64
	var below bool
	if err := g.r.pool.QueryRow(ctx, g.r.q.At, g.o.Group, g.o.Partition, p.progress).Scan(&at, &below); err != nil {
		return "", store.ClassifyRead("outbox", "progress check", g.name(), err)
	}
	switch {
	case at != nil && *at != p.scope:
		return fmt.Sprintf("segment %d, which the progress committed in Kafka says was published, is in the outbox with other contents (scope %d, published %d): "+
			"its number was reused after a restore or a failover that lost commits", p.progress, *at, p.scope), nil
	case at == nil && below:
		return fmt.Sprintf("segment %d, which the progress committed in Kafka says was published, is gone while segments below it are left: "+
			"the numbers were reused after a restore or a failover that lost commits", p.progress), nil
	}
	return "", nil
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

// transactionalID returns the transactional id of a group partition's
// producer: also the Kafka consumer group its progress is committed under.
func (r *Relay) transactionalID(group string, partition int) string {
	return fmt.Sprintf("%s.%s.%d", r.cfg.TransactionalIDPrefix, group, partition)
}

// newProducer opens the partition's producer and initialises it: Kafka
// bumps the producer epoch of the transactional id, which fences every
// producer of an earlier owner (their transactions are refused from now
// on), after completing or aborting the transaction one left open. Then it
// reads the progress committed in Kafka, waiting for any commit of it still
// being completed (RequireStable).
func (r *Relay) newProducer(ctx context.Context, g *relayGrant) (*producer, error) {
	id := r.transactionalID(g.o.Group, g.o.Partition)
	cl, err := kgo.NewClient(append(g.s.opts, kgo.TransactionalID(id))...)
	if err != nil {
		return nil, fmt.Errorf("kafka: relay client: %w", err)
	}
	p := &producer{cl: cl, id: id, topic: r.cfg.ProgressTopic, token: g.o.Token}
	if !g.s.topic.Load() {
		if err := r.ensureProgressTopic(ctx, cl); err != nil {
			cl.Close()
			return nil, err
		}
		g.s.topic.Store(true)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, p.classify("initialise the producer", err)
	}
	if err := p.readProgress(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	return p, nil
}

func (p *producer) close() { p.cl.Close() }

// classify wraps err, from step, as fence.ErrFenced when a newer producer
// of the transactional id fenced this one.
func (p *producer) classify(step string, err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		return fmt.Errorf("kafka: relay %s: %s: a newer producer of the partition fenced this one (%w): %w", p.id, step, fence.ErrFenced, err)
	}
	return fmt.Errorf("kafka: relay %s: %s: %w", p.id, step, err)
}

// readProgress reads the progress topic's id and the progress committed.
func (p *producer) readProgress(ctx context.Context) error {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(p.topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, p.cl)
	if err != nil {
		return p.classify("read the progress topic's metadata", err)
	}
	found := false
	for _, t := range mresp.Topics {
		if t.Topic != nil && *t.Topic == p.topic {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				return p.classify("read the progress topic's metadata", err)
			}
			p.topicID, found = t.TopicID, true
		}
	}
	if !found {
		return p.classify("read the progress topic's metadata", kerr.UnknownTopicOrPartition)
	}
	for {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = true
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = p.id
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = p.topic, []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, p.cl)
		if err != nil {
			return p.classify("read the progress", err)
		}
		code, offset, meta := progressIn(resp)
		if err := kerr.ErrorForCode(code); errors.Is(err, kerr.UnstableOffsetCommit) {
			// A transaction committing progress is being completed.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			continue
		} else if errors.Is(err, kerr.GroupIDNotFound) {
			offset = -1 // no progress committed yet (Kafka 4 answers so for a group it does not know)
		} else if err != nil {
			return p.classify("read the progress", err)
		}
		p.progress = max(offset, 0)
		if rest, ok := strings.CutPrefix(meta, progressMeta); ok {
			f := strings.Fields(rest)
			if len(f) >= 3 && f[1] == "scope" {
				p.owner = f[0]
				p.scope, _ = strconv.ParseInt(f[2], 10, 64)
			}
		}
		return nil
	}
}

// progressIn returns the error code, the offset and the metadata of
// partition 0 in an OffsetFetch response (in either of its layouts); a
// response without partition 0 is an error (UnknownTopicOrPartition).
func progressIn(resp *kmsg.OffsetFetchResponse) (code int16, offset int64, meta string) {
	found := false
	take := func(partition int32, pcode int16, off int64, m *string) {
		if partition != 0 {
			return
		}
		found = true
		if pcode != 0 && code == 0 {
			code = pcode
		}
		offset = off
		if m != nil {
			meta = *m
		}
	}
	if len(resp.Groups) > 0 {
		g := resp.Groups[0]
		code = g.ErrorCode
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				take(p.Partition, p.ErrorCode, p.Offset, p.Metadata)
			}
		}
	} else {
		code = resp.ErrorCode
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				take(p.Partition, p.ErrorCode, p.Offset, p.Metadata)
			}
		}
	}
	if !found && code == 0 {
		code = kerr.UnknownTopicOrPartition.Code
	}
	return code, offset, meta
}

// publish produces recs and commits the progress last in one Kafka
// transaction. Any error leaves the transaction's outcome to Kafka (the
// caller closes the producer; the next one's initialisation completes or
// aborts it, and reads the progress again).
func (p *producer) publish(ctx context.Context, recs []*kgo.Record, last, lastScope int64) error {
	if err := p.cl.BeginTransaction(); err != nil {
		return p.classify("begin a transaction", err)
	}
	var (
		mu    sync.Mutex
		first error
	)
	for _, rec := range recs {
		p.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
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
		p.abort()
		return p.classify("produce", err)
	}
	if err := p.commitProgress(ctx, last, lastScope); err != nil {
		p.abort()
		return err
	}
	// Once asked to commit, let the commit finish even if ctx ends: its
	// outcome is then known, and a handoff's new owner waits for it anyway.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := p.cl.EndTransaction(cctx, kgo.TryCommit); err != nil {
		return p.classify("commit the transaction", err)
	}
	p.progress, p.scope = last, lastScope
	return nil
}

// abort ends the open transaction with an abort, best effort: if it fails,
// the next producer's initialisation aborts it.
func (p *producer) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.cl.AbortBufferedRecords(ctx); err == nil {
		_ = p.cl.EndTransaction(ctx, kgo.TryAbort)
	}
}

// commitProgress adds the progress, last, to the open transaction: a
// consumer group offset of the transactional id's group on ProgressTopic's
// partition 0, committed or aborted with the records.
func (p *producer) commitProgress(ctx context.Context, last, lastScope int64) error {
	pid, epoch, err := p.cl.ProducerID(ctx)
	if err != nil {
		return p.classify("commit the progress", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = p.id, pid, epoch, p.id
	aresp, err := add.RequestWith(ctx, p.cl)
	if err == nil {
		err = kerr.ErrorForCode(aresp.ErrorCode)
	}
	if err != nil {
		return p.classify("add the progress to the transaction", err)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = p.id, p.id, pid, epoch
	req.Generation = -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = p.topic, p.topicID
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, last, -1
	meta := fmt.Sprintf("%s%s scope %d token %d", progressMeta, p.outbox, lastScope, int64(p.token))
	rp.Metadata = &meta
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, p.cl)
	if err == nil {
		for _, t := range resp.Topics {
			for _, pp := range t.Partitions {
				if e := kerr.ErrorForCode(pp.ErrorCode); e != nil && err == nil {
					err = e
				}
			}
		}
	}
	if err != nil {
		return p.classify("commit the progress", err)
	}
	return nil
}

// ensureProgressTopic creates ProgressTopic, with one partition, unless it
// exists.
func (r *Relay) ensureProgressTopic(ctx context.Context, cl *kgo.Client) error {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(r.cfg.ProgressTopic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("kafka: relay: read the progress topic's metadata: %w", err)
	}
	for _, t := range mresp.Topics {
		if t.Topic != nil && *t.Topic == r.cfg.ProgressTopic && t.ErrorCode == 0 {
			return nil
		}
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = r.cfg.ProgressTopic, 1, -1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Topics) > 0 {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: relay: create the progress topic %q: %w", r.cfg.ProgressTopic, err)
	}
	return nil
}
