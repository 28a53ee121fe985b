// Package outbox publishes records to Kafka exactly once, together with a
// handler's effects in PostgreSQL: the fenced transactional outbox.
//
// In the fenced transaction a runner gives a handler (a queue HandleTx
// handler, a batch item's, a Kafka batch handler), Add appends records to
// publish. They commit or roll back with the handler's effects and its
// fence check: a stale owner's records are refused with its effects. Once
// committed, the partition's relay (kafka.Relay, run by the worker that
// owns the partition) publishes them in commit order through a Kafka
// transactional producer, storing in the same Kafka transaction how far
// the outbox is published; so each record is published once, across
// crashes, pauses and handoffs, and the records of one handler transaction
// become visible to read_committed consumers together.
//
// See docs/kafka.md, "Exactly once into Kafka", for the guarantees and
// their limits.
package outbox
