package partition_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/partition"
)

// A member of the group "emails" with 64 partitions. Run is called once per
// partition this member is granted, and works until told to stop.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	db, err := leasehold.Open(pool, leasehold.Config{})
	if err != nil {
		panic(err)
	}
	m, err := partition.New(db, partition.Config{
		Group:      "emails",
		Partitions: 64,
		Run: func(ctx context.Context, o partition.Ownership) {
			fmt.Printf("own partition %d with token %v\n", o.Partition, o.Token)
			<-ctx.Done() // handoff, lost lease or Stop: finish in-flight work and return
		},
	})
	if err != nil {
		panic(err)
	}
	if err := m.Start(ctx); err != nil {
		panic(err)
	}
	<-ctx.Done()
	m.Stop(context.Background()) // graceful: the others take over at once
}

// Producers in any language compute a key's partition as XXH64(key) mod n.
func ExampleOf() {
	fmt.Println(partition.OfString("customer-42", 64), partition.OfString("customer-42", 64) == partition.Of([]byte("customer-42"), 64))
	// Output: 15 true
}
