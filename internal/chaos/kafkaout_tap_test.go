package chaos

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tapExchange passes one request and its response, as kfake reads and
// writes them, through a tapped connection: the request in chunks of
// chunk bytes.
func tapExchange(c *tapConn, req kmsg.Request, resp kmsg.Response, corr int32, chunk int) {
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("relay")).AppendRequest(nil, req, corr)
	for len(frame) > 0 {
		n := min(chunk, len(frame))
		c.requestBytes(frame[:n])
		frame = frame[n:]
	}
	resp.SetVersion(req.GetVersion())
	buf := []byte{0, 0, 0, 0, 0, 0, 0, 0}
	if resp.IsFlexible() {
		buf = append(buf, 0)
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	binary.BigEndian.PutUint32(buf[4:], uint32(corr))
	c.response(buf)
}

func endTxn(commit bool, epoch int16, code int16) (kmsg.Request, kmsg.Response) {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = 5, "leasehold-outbox.chaos.3", 77, epoch, commit
	resp := kmsg.NewPtrEndTxnResponse()
	resp.ErrorCode = code
	return req, resp
}

// The tap counts the requests Kafka refused a fenced producer, once per
// producer and epoch, and nothing else.
func TestKafkaTapCountsFencedRequests(t *testing.T) {
	var tap kafkaTap
	c := &tapConn{t: &tap, reqs: map[int32]tapRequest{}}
	req, resp := endTxn(true, 4, 0)
	tapExchange(c, req, resp, 1, 1000) // a commit that succeeds
	req, resp = endTxn(true, 3, kerr.ProducerFenced.Code)
	tapExchange(c, req, resp, 2, 7) // a stale commit, read in pieces
	req, resp = endTxn(false, 3, kerr.ProducerFenced.Code)
	tapExchange(c, req, resp, 3, 1000) // its abort, refused too: the same producer
	req, resp = endTxn(true, 9, kerr.InvalidTxnState.Code)
	tapExchange(c, req, resp, 4, 3) // a commit one epoch behind (KIP-890)
	req, resp = endTxn(false, 10, kerr.InvalidTxnState.Code)
	tapExchange(c, req, resp, 5, 1000) // not a commit: not counted

	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.Version, add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = 4, "leasehold-outbox.chaos.5", 78, 2, "g"
	aresp := kmsg.NewPtrAddOffsetsToTxnResponse()
	aresp.ErrorCode = kerr.InvalidProducerEpoch.Code
	tapExchange(c, add, aresp, 6, 5)

	meta := kmsg.NewPtrMetadataRequest() // not transactional: not followed
	meta.Version = 12
	tapExchange(c, meta, kmsg.NewPtrMetadataResponse(), 7, 1000)

	producers, requests, by := tap.refusals()
	if producers != 3 || requests != 4 || by["EndTxn (commit)"] != 2 || by["EndTxn (abort)"] != 1 || by["AddOffsetsToTxn"] != 1 {
		t.Fatalf("refusals: %d producers, %d requests, %v; want 3, 4, EndTxn (commit) 2, EndTxn (abort) 1, AddOffsetsToTxn 1",
			producers, requests, by)
	}
	if len(c.reqs) != 0 || len(c.in) != 0 {
		t.Fatalf("left over: %d requests, %d bytes", len(c.reqs), len(c.in))
	}
}
