package outbox_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/outboxtx"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/outbox"
)

// The relay's progress is one number per partition, so a segment must
// never become visible before one numbered below it: concurrent
// transactions appending to one partition, committing in any order, must
// show a reader numbers 1..n without gaps at every instant. The control
// numbers its rows from a sequence when the transaction begins, as an
// outbox keyed by an identity column does, and the same reader must see
// gaps.
func TestSegmentsBecomeVisibleInNumberOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	st, err := store.For(db.Schema())
	if err != nil {
		t.Fatal(err)
	}
	schema := pgx.Identifier{db.Schema()}.Sanitize()
	if _, err := db.Pool().Exec(ctx, `CREATE TABLE `+schema+`.ctl (seq bigint NOT NULL); CREATE SEQUENCE `+schema+`.ctl_seq`); err != nil {
		t.Fatal(err)
	}
	sealed := func(ctx context.Context, tx pgx.Tx, r *rand.Rand) error {
		box := outboxtx.New("test", st, "g", 0, 1, tx)
		if err := outbox.Add(outboxtx.With(ctx, box), tx, outbox.Record{Topic: "out", Value: []byte("v")}); err != nil {
			return err
		}
		time.Sleep(time.Duration(r.IntN(2000)) * time.Microsecond)
		return box.Seal(ctx, tx)
	}
	control := func(ctx context.Context, tx pgx.Tx, r *rand.Rand) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+schema+`.ctl SELECT nextval('`+db.Schema()+`.ctl_seq')`)
		time.Sleep(time.Duration(r.IntN(2000)) * time.Microsecond)
		return err
	}
	gaps := func(write func(context.Context, pgx.Tx, *rand.Rand) error, read string) (n, seen int) {
		var wg sync.WaitGroup
		done := make(chan struct{})
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), 1))
				for range 40 {
					tx, err := db.Pool().Begin(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if err := write(ctx, tx, r); err != nil {
						tx.Rollback(ctx)
						t.Error(err)
						return
					}
					time.Sleep(time.Duration(r.IntN(2000)) * time.Microsecond)
					if err := tx.Commit(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		go func() { wg.Wait(); close(done) }()
		for {
			select {
			case <-done:
				return n, seen
			default:
			}
			var count, top int64
			if err := db.Pool().QueryRow(ctx, read).Scan(&count, &top); err != nil {
				t.Fatal(err)
			}
			seen++
			if count != top {
				n++ // a number below the highest visible one is not visible yet
			}
		}
	}
	n, reads := gaps(sealed, `SELECT count(*), coalesce(max(seq), 0) FROM `+schema+`.outbox_segments WHERE group_name = 'g' AND partition = 0`)
	if n > 0 {
		t.Errorf("%d of %d reads saw a gap in the segments' numbers", n, reads)
	}
	cn, creads := gaps(control, `SELECT count(*), coalesce(max(seq), 0) FROM `+schema+`.ctl`)
	if cn == 0 {
		t.Errorf("control: none of %d reads saw a gap: the check cannot catch one", creads)
	}
	t.Logf("segments: %d gaps in %d reads; control: %d in %d", n, reads, cn, creads)
}
