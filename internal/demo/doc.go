// Package demo is `leasehold demo`: a scripted scenario on the chaos
// engine (internal/chaos). It opens a chaos.Local fleet of in-process
// members on the engine's workload ("queue", or "kafka" for the Kafka
// story), and drives it through the story's steps: three workers share the
// partitions; jobs are fed; worker-1 crashes and the others take over once
// its leases expire; then a worker pauses mid-run past its lease, with its
// effects written and its transactions open, until the others hold its
// partitions; when it resumes, its late commits carry the old fencing token
// and are refused. The engine's checker (chaos.Check) then reads the
// ledger, the jobs, the members' histories and the lease audit, and the
// Report adds the story's own measurements and checks.
//
// The package prints nothing: the story reaches the caller as Events (a
// step, a detail line, the progress), and the Report is the caller's to
// print.
package demo
