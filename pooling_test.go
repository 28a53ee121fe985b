package leasehold_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
)

// Open and WithPool refuse, with TransactionPooling, a pool that prepares
// named statements (which a pooler in transaction mode cannot carry), and
// Open an unparsable ListenURL; they accept the query modes without named
// statements, and a ListenURL without TransactionPooling.
func TestOpenChecksTransactionPooling(t *testing.T) {
	pool := func(mode string) *pgxpool.Pool {
		url := "postgres://u@127.0.0.1:1/db"
		if mode != "" {
			url += "?default_query_exec_mode=" + mode
		}
		pc, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		p, err := pgxpool.NewWithConfig(t.Context(), pc) // no I/O: nothing dials until used
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	if _, err := leasehold.Open(pool(""), leasehold.Config{TransactionPooling: true}); !errors.Is(err, leasehold.ErrInvalidConfig) {
		t.Errorf("TransactionPooling on pgx's default mode: %v; want ErrInvalidConfig", err)
	}
	for _, mode := range []string{"exec", "cache_describe", "describe_exec", "simple_protocol"} {
		db, err := leasehold.Open(pool(mode), leasehold.Config{TransactionPooling: true})
		if err != nil || !db.TransactionPooling() || !db.Listen().Off {
			t.Errorf("TransactionPooling on mode %s: %v; want it accepted, without a listening session", mode, err)
		}
	}
	if _, err := leasehold.Open(pool("exec"), leasehold.Config{TransactionPooling: true, ListenURL: "postgres://u@h:notaport/db"}); !errors.Is(err, leasehold.ErrInvalidConfig) {
		t.Errorf("an unparsable ListenURL: %v; want ErrInvalidConfig", err)
	}
	pooled, err := leasehold.Open(pool("exec"), leasehold.Config{TransactionPooling: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pooled.WithPool(pool("")); !errors.Is(err, leasehold.ErrInvalidConfig) {
		t.Errorf("WithPool of a pool in pgx's default mode behind a transaction pooler: %v; want ErrInvalidConfig", err)
	}
	if other, err := pooled.WithPool(pool("exec")); err != nil || other.Listen().Off != pooled.Listen().Off || !other.TransactionPooling() {
		t.Errorf("WithPool of an exec-mode pool: %v; want the DB's settings kept", err)
	}
	db, err := leasehold.Open(pool(""), leasehold.Config{ListenURL: "postgres://u@127.0.0.1:2/db"})
	if err != nil || db.Listen().Off || db.Listen().Direct == nil || db.Listen().Direct.Port != 2 {
		t.Errorf("a ListenURL without TransactionPooling: %v; want a direct listening session on port 2", err)
	}
	db, err = leasehold.Open(pool(""), leasehold.Config{})
	if err != nil || db.Listen().Off || db.Listen().Direct != nil {
		t.Errorf("the default: %v; want the listening session taken from the pool", err)
	}
}
