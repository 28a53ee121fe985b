// Package outboxtx is the plumbing between package outbox, whose Add a
// handler calls, and the runners that give handlers a fenced transaction
// (the queue's transactional handlers, Kafka batch handlers) and the relay
// that publishes the outbox (kafka.Relay).
//
// A runner puts a Scope on the handler's context (With): the group, the
// partition and the token of the grant, and the connection of the fenced
// transaction. outbox.Add appends through it; after the handler, the
// runner seals what was appended into one segment (Scope.Seal), in the
// same transaction, before its fence check, and after the COMMIT wakes the
// partition's relay in this process (Scope.Committed, Wake). A relay waits
// for those wake-ups (Register): the partition's owner is the only writer
// of its outbox, and it runs the relay, so no statement polls for work.
package outboxtx
