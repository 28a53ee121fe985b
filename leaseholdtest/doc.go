// Package leaseholdtest helps test code that uses leasehold: a throwaway
// migrated schema on a real PostgreSQL server, assertions on the jobs a
// piece of code enqueued, and running one job's handler inline, with its
// transaction and a real fencing token, as the queue's processor would.
//
// A test package using it calls Run from TestMain, so that the throwaway
// PostgreSQL cluster Pool may start is removed when the tests end:
//
//	func TestMain(m *testing.M) { os.Exit(leaseholdtest.Run(m)) }
//
//	func TestSignup(t *testing.T) {
//		ctx := context.Background()
//		db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
//		// ... code under test enqueues a WelcomeEmail job ...
//		job := leaseholdtest.RequireEnqueued[WelcomeEmail](ctx, t, db, &leaseholdtest.RequireOpts{Group: "mail"})
//		w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: workers})
//		res, err := w.WorkJob(ctx, t, job.ID)
//		// ... res.Outcome is queue.OutcomeCompleted, err nil ...
//	}
//
// See docs/testing.md.
package leaseholdtest
