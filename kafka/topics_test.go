package kafka_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
)

// A group's topic list is part of its layout (topic i's partition p is the
// group's partition i×PartitionsPerTopic + p): the first Open records it,
// and a consumer with another list is refused, even one with the same
// topics reordered or with the same partition count, since it would
// consume some Kafka partition under another partition's lease. The same
// list is accepted, and a list naming a missing topic is never recorded.
func TestGroupTopicListIsRecordedAndEnforced(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 2, "a", "b")
	pool := pgtest.Pool(t)
	open := func(topics []string, perTopic int) error {
		c, err := kafka.New(pgtest.DBOn(t, pool), kafka.Config{Topics: topics, Brokers: brokers,
			PartitionsPerTopic: perTopic, Handler: ledgerHandler("x")})
		pgtest.Must(t, err)
		err = c.Open(pgtest.ContextFor(t, 20*time.Second), "g")
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			pgtest.Must(t, c.Close(ctx))
		}
		return err
	}
	// A first Open naming a topic that does not exist fails and records nothing.
	if err := open([]string{"nope", "a"}, 2); !errors.Is(err, kafka.ErrTopicNotFound) {
		t.Fatalf("Open with a missing topic = %v; want ErrTopicNotFound", err)
	}
	pgtest.Must(t, open([]string{"a", "b"}, 2))
	for _, tc := range []struct {
		topics   []string
		perTopic int
	}{
		{[]string{"b", "a"}, 2}, // reordered: a/0 would be the group's partition 2, not 0
		{[]string{"a"}, 4},      // the same partition count, another layout
		{[]string{"a"}, 2},      // a subset
	} {
		err := open(tc.topics, tc.perTopic)
		var te *kafka.TopicsError
		if !errors.Is(err, kafka.ErrTopicsMismatch) || !errors.As(err, &te) ||
			!slices.Equal(te.Recorded, []string{"a", "b"}) || !slices.Equal(te.Configured, tc.topics) || te.Group != "g" {
			t.Errorf("Open with topics %q after the group recorded [a b] = %v; want a *TopicsError naming both lists", tc.topics, err)
		}
	}
	// The same list, again and concurrently, is accepted.
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- open([]string{"a", "b"}, 2) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("Open with the group's own topic list = %v; want nil", err)
		}
	}
	// Another group records its own list.
	c, err := kafka.New(pgtest.DBOn(t, pool), kafka.Config{Topics: []string{"b", "a"}, Brokers: brokers,
		PartitionsPerTopic: 2, Handler: ledgerHandler("x")})
	pgtest.Must(t, err)
	pgtest.Must(t, c.Open(pgtest.ContextFor(t, 20*time.Second), "g2"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pgtest.Must(t, c.Close(ctx))
}

// Concurrent first Opens of one group with different lists: exactly one
// list is recorded, and every Open that does not match it is refused.
func TestConcurrentFirstOpensAgreeOnOneTopicList(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "a", "b")
	pool := pgtest.Pool(t)
	lists := [][]string{{"a", "b"}, {"b", "a"}, {"a", "b"}, {"b", "a"}, {"a"}, {"b"}}
	errs := make([]error, len(lists))
	done := make(chan int)
	for i, topics := range lists {
		go func() {
			c, err := kafka.New(pgtest.DBOn(t, pool), kafka.Config{Topics: topics, Brokers: brokers,
				PartitionsPerTopic: 2, Handler: ledgerHandler("x")})
			if err == nil {
				if err = c.Open(pgtest.ContextFor(t, 20*time.Second), "g"); err == nil {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err = c.Close(ctx)
					cancel()
				}
			}
			errs[i] = err
			done <- i
		}()
	}
	for range lists {
		<-done
	}
	var recorded []string
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT topics FROM leasehold.kafka_topics WHERE group_name = 'g'`).Scan(&recorded))
	accepted := 0
	for i, err := range errs {
		switch {
		case slices.Equal(lists[i], recorded) && err == nil:
			accepted++
		case !slices.Equal(lists[i], recorded) && errors.Is(err, kafka.ErrTopicsMismatch):
		default:
			t.Errorf("Open with %q (recorded %q) = %v", lists[i], recorded, err)
		}
	}
	if accepted == 0 {
		t.Errorf("no Open accepted; recorded %q", recorded)
	}
}
