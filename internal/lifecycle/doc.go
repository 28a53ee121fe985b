// Package lifecycle is the Start/Stop state machine shared by every
// leasehold service that is started and stopped (partition.Member,
// worker.Worker, which runs the queue and Kafka sources), so that all of
// them give the same answers:
//
//   - Start runs the service's start-up once. A second Start on a started
//     service runs nothing and returns the component's sentinel wrapping
//     [ErrStarted]; a Start on a stopped service (including one whose Start
//     failed) returns the component's sentinel wrapping [ErrStopped]. A
//     stopped service cannot be restarted.
//   - A failed start-up runs the service's cleanup and leaves it stopped:
//     Start returns the start-up's error, and every Stop after it returns
//     the cleanup's result.
//   - The first Stop stops a started service, or only releases the
//     resources of one that was never started, and records the result.
//     Every later Stop returns that same result without running anything.
//   - Start and Stop serialise: a Stop during a slow Start waits for it
//     (bounded by Start's context), then stops what it started; a Start
//     during a Stop waits for it, then is refused as stopped.
//
// The sentinels are public as leasehold.ErrStarted and leasehold.ErrStopped,
// and each component exposes its own (made with [Started] and [Stopped]) for
// its callers to branch on with errors.Is.
package lifecycle
