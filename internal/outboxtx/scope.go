package outboxtx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
)

// Scope is one fenced transaction's outbox: where records appended in it
// go, and how many were.
type Scope struct {
	id        int64 // stamps the records appended through it, and its segment
	place     string
	schema    string
	group     string
	partition int
	token     fence.Token
	conn      *pgx.Conn
	sql       *store.OutboxSQL
	added     atomic.Int64
	closed    atomic.Bool // no more appends (the handler returned)
	sealed    atomic.Bool
}

type ctxKey struct{}

// New returns the scope of tx, the fenced transaction of group's partition
// under token, whose statements are st; place is the database's (Place).
func New(place string, st *store.Statements, group string, partition int, token fence.Token, tx pgx.Tx) *Scope {
	return &Scope{id: rand.Int64N(math.MaxInt64) + 1, place: place, schema: st.Schema, group: group, partition: partition,
		token: token, conn: tx.Conn(), sql: &st.Outbox}
}

// Place names the database a pool connects to (host, port and database
// name), so that wake-ups of one database's outbox do not reach the relay
// of another's in the same process. Pools cloned from one another share it.
func Place(pool *pgxpool.Pool) string {
	c := pool.Config().ConnConfig
	return fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
}

// With returns ctx carrying s.
func With(ctx context.Context, s *Scope) context.Context { return context.WithValue(ctx, ctxKey{}, s) }

// From returns the scope ctx carries, nil if none.
func From(ctx context.Context) *Scope {
	s, _ := ctx.Value(ctxKey{}).(*Scope)
	return s
}

// ErrOtherTx is returned by Append given a transaction other than the
// scope's (or a savepoint of it).
var ErrOtherTx = errors.New("not the handler's fenced transaction")

// ErrSealed is returned by Append after the scope was sealed (the handler
// returned).
var ErrSealed = errors.New("the handler's transaction is already being committed")

// Append appends records (parallel slices) in tx, which must be the
// scope's transaction or a savepoint of it.
func (s *Scope) Append(ctx context.Context, tx pgx.Tx, topics []string, keys, values, headers [][]byte) error {
	if tx == nil || tx.Conn() != s.conn {
		return ErrOtherTx
	}
	if s.closed.Load() {
		return ErrSealed
	}
	if _, err := tx.Exec(ctx, s.sql.Append, s.group, s.partition, topics, keys, values, headers, s.id); err != nil {
		return store.Classify("outbox", "append", fmt.Sprintf("%s/%d", s.group, s.partition), err)
	}
	s.added.Add(int64(len(topics)))
	return nil
}

// Added reports how many records were appended (savepoints rolled back
// afterwards included).
func (s *Scope) Added() int64 { return s.added.Load() }

// Close refuses further appends: the runner calls it once the handler has
// returned, whether or not it seals (an Add from a goroutine the handler
// left behind must not append records no segment will hold).
func (s *Scope) Close() { s.closed.Store(true) }

// Seal makes the records appended in tx one segment, numbered after the
// partition's last (the head row stays locked until tx ends). It does
// nothing if none were appended. The runner calls it after the handler
// returned nil, before its fence check, in the same transaction; once.
func (s *Scope) Seal(ctx context.Context, tx pgx.Tx) error {
	b := &pgx.Batch{}
	s.QueueSeal(b)
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// QueueSeal is Seal queued in b, to run before the statements queued after
// it (in one round trip with them); b's results report its error.
func (s *Scope) QueueSeal(b *pgx.Batch) {
	s.closed.Store(true)
	if s.sealed.Swap(true) || s.added.Load() == 0 {
		return
	}
	b.Queue(s.sql.Seal, s.group, s.partition, int32(min(s.added.Load(), 1<<31-1)), int64(s.token), s.id).QueryRow(func(row pgx.Row) error {
		var seq int64
		if err := row.Scan(&seq); err != nil {
			return store.Classify("outbox", "seal", fmt.Sprintf("%s/%d", s.group, s.partition), err)
		}
		return nil
	})
}

// Committed is called by the runner after tx committed (or may have: an
// unknown outcome). If records were appended, it wakes the partition's
// relay in this process; if no relay is open for the group in this process
// (Opened), it logs once per group and process at warn level that they
// wait for one.
func (s *Scope) Committed(log *slog.Logger) {
	if s.added.Load() == 0 {
		return
	}
	if !Wake(s.place, s.schema, s.group, s.partition) && !opened(s.place, s.schema, s.group) {
		if _, seen := warned.LoadOrStore(s.place+"\x00"+s.schema+"\x00"+s.group, true); !seen && log != nil {
			log.Warn("outbox: records committed, but no relay runs for the group in this process: they are published once one does (worker.Config.Relay)",
				"group", s.group, "partition", s.partition)
		}
	}
}

var warned sync.Map // schema + group -> true
