package leaseholdtest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/queue"
)

// Welcome is a job the code under test enqueues.
type Welcome struct {
	Email string `json:"email"`
}

func (Welcome) Kind() string { return "welcome" }

// signup is the code under test: it enqueues a welcome email.
func signup(ctx context.Context, c *queue.Client, email string) error {
	_, err := c.Enqueue(ctx, queue.Job{Group: "mail", Key: email, Args: Welcome{email}})
	return err
}

// A test asserts what the code under test enqueued, then runs the job's
// handler inline. (In a test, t is the test's *testing.T; an Example has
// none, so exampleTB stands in for it here.)
func Example() {
	t := &exampleTB{}
	defer t.cleanup()
	ctx := context.Background()

	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	leaseholdtest.Group(ctx, t, db, "mail", 4)
	c, _ := queue.New(db, queue.Config{})
	if err := signup(ctx, c, "ada@example.com"); err != nil {
		t.Fatalf("signup: %v", err)
	}

	job := leaseholdtest.RequireEnqueued[Welcome](ctx, t, db, &leaseholdtest.RequireOpts{Group: "mail"})
	fmt.Println("enqueued:", job.Kind, job.Args.Email)

	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[Welcome]) error {
		fmt.Println("sending to", w.Args.Email, "under a token:", w.Token > 0)
		return nil
	})
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})
	res, err := w.WorkJob(ctx, t, job.ID)
	fmt.Println("outcome:", res.Outcome, res.Job.State, err)
	leaseholdtest.RequireNotEnqueued[Welcome](ctx, t, db, nil)
	// Output:
	// enqueued: welcome ada@example.com
	// sending to ada@example.com under a token: true
	// outcome: completed completed <nil>
}

// exampleTB is the little of testing.TB the helpers use, for an Example.
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (*exampleTB) Helper()                           {}
func (t *exampleTB) Cleanup(f func())                { t.cleanups = append(t.cleanups, f) }
func (*exampleTB) Logf(format string, args ...any)   { fmt.Printf(format+"\n", args...) }
func (*exampleTB) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (*exampleTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleTB) cleanup() {
	for _, f := range slices.Backward(t.cleanups) {
		f()
	}
}
