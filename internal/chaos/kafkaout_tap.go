package chaos

import (
	"encoding/binary"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaTap watches the in-process Kafka's connections (it wraps the
// listener kfake accepts them on, kfake.ListenFn) for transactional
// requests that Kafka refused because a newer producer of the same
// transactional id had fenced the sender: answered PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH. For the kafka-out workload that is a stale
// relay's transaction refused (the newer owner's relay initialised the
// partition's transactional id, bumping its epoch), whether or not the
// stale relay itself still counts it (kafka.RelayStats.Fenced counts only
// refusals seen while the relay's grant lasts). It relies on kfake reading
// each request frame in full before answering and writing each response
// frame with one Write.
type kafkaTap struct {
	mu      sync.Mutex
	refused map[tapProducer]int // refused requests, by producer
	by      map[string]int      // refused requests, by request name
}

// tapProducer is a transactional producer at one epoch.
type tapProducer struct {
	txnID string
	id    int64
	epoch int16
}

// refusals returns how many producers had requests refused, how many
// requests were, and how many by request name (EndTxn, Produce, ...).
func (t *kafkaTap) refusals() (producers, requests int, by map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.refused {
		requests += n
	}
	by = map[string]int{}
	for k, n := range t.by {
		by[k] = n
	}
	return len(t.refused), requests, by
}

func (t *kafkaTap) refuse(p tapProducer, req kmsg.Request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refused == nil {
		t.refused, t.by = map[tapProducer]int{}, map[string]int{}
	}
	t.refused[p]++
	name := kmsg.NameForKey(req.Key())
	if r, ok := req.(*kmsg.EndTxnRequest); ok {
		name += map[bool]string{true: " (commit)", false: " (abort)"}[r.Commit]
	}
	t.by[name]++
}

// listen is a kfake.ListenFn: net.Listen, its connections tapped.
func (t *kafkaTap) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return &tapListener{Listener: ln, t: t}, nil
}

type tapListener struct {
	net.Listener
	t *kafkaTap
}

func (l *tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: c, t: l.t, reqs: map[int32]tapRequest{}}, nil
}

// tapConn is one client connection: the requests read from it, the
// responses written to it.
type tapConn struct {
	net.Conn
	t    *kafkaTap
	mu   sync.Mutex
	in   []byte               // request bytes not parsed yet
	reqs map[int32]tapRequest // transactional requests awaiting their response, by correlation id
}

// tapRequest is a transactional request awaiting its response.
type tapRequest struct {
	req  kmsg.Request
	prod tapProducer
}

func (c *tapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.requestBytes(b[:n])
	}
	return n, err
}

func (c *tapConn) Write(b []byte) (int, error) {
	c.response(b)
	return c.Conn.Write(b)
}

// requestBytes takes bytes read from the client and notes each complete
// transactional request in them.
func (c *tapConn) requestBytes(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in = append(c.in, b...)
	for len(c.in) >= 4 {
		size := int(binary.BigEndian.Uint32(c.in))
		if len(c.in) < 4+size {
			return
		}
		frame := c.in[4 : 4+size]
		c.in = append([]byte(nil), c.in[4+size:]...)
		r := kbin.Reader{Src: frame}
		key, version, corr := r.Int16(), r.Int16(), r.Int32()
		r.NullableString() // client id
		switch key {
		case kmsg.Produce.Int16(), kmsg.AddPartitionsToTxn.Int16(), kmsg.AddOffsetsToTxn.Int16(),
			kmsg.EndTxn.Int16(), kmsg.TxnOffsetCommit.Int16():
		default:
			continue
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.IsFlexible() {
			kmsg.SkipTags(&r)
		}
		if !r.Ok() || req.ReadFrom(r.Src) != nil {
			continue
		}
		if p, ok := producerOf(req); ok {
			c.reqs[corr] = tapRequest{req: req, prod: p}
		}
	}
}

// producerOf returns the transactional producer that sent req.
func producerOf(req kmsg.Request) (tapProducer, bool) {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		if r.TransactionID == nil {
			return tapProducer{}, false
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				var rb kmsg.RecordBatch
				if rb.ReadFrom(p.Records) == nil {
					return tapProducer{*r.TransactionID, rb.ProducerID, rb.ProducerEpoch}, true
				}
			}
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version < 4 {
			return tapProducer{r.TransactionalID, r.ProducerID, r.ProducerEpoch}, true
		}
		if len(r.Transactions) > 0 {
			t := r.Transactions[0]
			return tapProducer{t.TransactionalID, t.ProducerID, t.ProducerEpoch}, true
		}
	case *kmsg.AddOffsetsToTxnRequest:
		return tapProducer{r.TransactionalID, r.ProducerID, r.ProducerEpoch}, true
	case *kmsg.EndTxnRequest:
		return tapProducer{r.TransactionalID, r.ProducerID, r.ProducerEpoch}, true
	case *kmsg.TxnOffsetCommitRequest:
		return tapProducer{r.TransactionalID, r.ProducerID, r.ProducerEpoch}, true
	}
	return tapProducer{}, false
}

// response takes a response frame written to the client and counts a
// refusal of a transactional request for fencing.
func (c *tapConn) response(b []byte) {
	if len(b) < 8 {
		return
	}
	corr := int32(binary.BigEndian.Uint32(b[4:]))
	c.mu.Lock()
	tr, ok := c.reqs[corr]
	delete(c.reqs, corr)
	c.mu.Unlock()
	if !ok {
		return
	}
	resp := tr.req.ResponseKind()
	resp.SetVersion(tr.req.GetVersion())
	r := kbin.Reader{Src: b[8:]}
	if resp.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if !r.Ok() || resp.ReadFrom(r.Src) != nil {
		return
	}
	if fencedIn(tr.req, resp) {
		c.t.refuse(tr.prod, tr.req)
	}
}

// fencedIn reports whether resp refuses its request req (or a part of it)
// because the producer was fenced: PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH, or, for a commit, INVALID_TXN_STATE, the answer
// of KIP-890's retry check to a commit one epoch behind when the newer
// producer has not begun a transaction yet (Kafka takes it for the retry
// of an earlier end of the transaction, which aborted it).
func fencedIn(req kmsg.Request, resp kmsg.Response) bool {
	var codes []int16
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	case *kmsg.AddPartitionsToTxnResponse:
		codes = append(codes, r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
		for _, x := range r.Transactions {
			for _, t := range x.Topics {
				for _, p := range t.Partitions {
					codes = append(codes, p.ErrorCode)
				}
			}
		}
	case *kmsg.AddOffsetsToTxnResponse:
		codes = append(codes, r.ErrorCode)
	case *kmsg.EndTxnResponse:
		codes = append(codes, r.ErrorCode)
		if end, ok := req.(*kmsg.EndTxnRequest); ok && end.Commit && r.ErrorCode == kerr.InvalidTxnState.Code {
			return true
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
	}
	for _, c := range codes {
		if c == kerr.ProducerFenced.Code || c == kerr.InvalidProducerEpoch.Code {
			return true
		}
	}
	return false
}
