package leaseholdtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/queuehook"
	"github.com/leasehold/leasehold/queue"
)

// maxJobs is the most jobs of one kind (in any state) an assertion reads:
// with more, it fails rather than judge on some of them. A variable for
// the package's tests.
var maxJobs = 10_000

// maxListed is the most jobs a failure message lists.
const maxListed = 10

// RequireOpts narrows the jobs an assertion looks for. A nil *RequireOpts,
// like the zero value, matches every pending job of the kind.
type RequireOpts struct {
	// Group, if set, is the job's group. Defaults to any group.
	Group string
	// Key, if set, is the job's key. Defaults to any key.
	Key string
	// Args, if set, are the job's arguments: the stored arguments must be
	// the same JSON value as Args encoded (field order and spacing do not
	// matter). Defaults to any arguments.
	Args queue.Args
	// State is the job's state. Defaults to queue.StatePending.
	State queue.JobState
	// RunAfter and RunBefore, if set, bound the job's RunAt (inclusive).
	// Default to no bound.
	RunAfter, RunBefore time.Time
	// UniqueKey, if set, is the job's unique key. Defaults to any.
	UniqueKey string
	// MaxAttempts, if set, is the job's MaxAttempts. Defaults to any.
	MaxAttempts int
}

// Job is an enqueued job as an assertion found it: its JobInfo, with its
// arguments decoded (JobInfo.Args holds them as stored).
type Job[T queue.Args] struct {
	queue.JobInfo
	// Args are the job's arguments, decoded.
	Args T
}

// RequireEnqueued fails the test unless exactly one job of T's kind
// matching opts is in db's schema, and returns it. The failure message
// names the kind and what opts asked for, and lists the jobs of the kind
// found with how each differs, or, when there are none, the pending jobs of
// other kinds. To assert inside a transaction before it commits, use
// RequireEnqueuedTx.
func RequireEnqueued[T queue.Args](ctx context.Context, t testing.TB, db *leasehold.DB, opts *RequireOpts) *Job[T] {
	t.Helper()
	return RequireEnqueuedTx[T](ctx, t, db, db.Pool(), opts)
}

// RequireEnqueuedTx is RequireEnqueued reading on q: a transaction (to see
// its uncommitted jobs) or a connection.
func RequireEnqueuedTx[T queue.Args](ctx context.Context, t testing.TB, db *leasehold.DB, q fence.Querier, opts *RequireOpts) *Job[T] {
	t.Helper()
	kind := kindOf[T]()
	jobs, ok := jobsOf(ctx, t, db, q, kind)
	if !ok {
		return nil
	}
	var match []queue.JobInfo
	for _, j := range jobs {
		if len(opts.mismatch(j)) == 0 {
			match = append(match, j)
		}
	}
	switch len(match) {
	case 1:
		var args T
		if err := json.Unmarshal(match[0].Args, &args); err != nil {
			t.Fatalf("leaseholdtest: job %d of kind %q: its args %s do not decode into %T: %v", match[0].ID, kind, match[0].Args, args, err)
			return nil
		}
		return &Job[T]{JobInfo: match[0], Args: args}
	case 0:
		t.Fatalf("leaseholdtest: no job of kind %q enqueued %s; %s", kind, opts, nearMisses(ctx, db, q, kind, jobs, opts))
	default:
		t.Fatalf("leaseholdtest: %d jobs of kind %q enqueued %s, want exactly one (narrow the RequireOpts, or use RequireManyEnqueued):\n%s",
			len(match), kind, opts, list(match, nil))
	}
	return nil
}

// RequireNotEnqueued fails the test if a job of T's kind matching opts is
// in db's schema, listing the jobs that match.
func RequireNotEnqueued[T queue.Args](ctx context.Context, t testing.TB, db *leasehold.DB, opts *RequireOpts) {
	t.Helper()
	RequireNotEnqueuedTx[T](ctx, t, db, db.Pool(), opts)
}

// RequireNotEnqueuedTx is RequireNotEnqueued reading on q: a transaction
// or a connection.
func RequireNotEnqueuedTx[T queue.Args](ctx context.Context, t testing.TB, db *leasehold.DB, q fence.Querier, opts *RequireOpts) {
	t.Helper()
	kind := kindOf[T]()
	jobs, ok := jobsOf(ctx, t, db, q, kind)
	if !ok {
		return
	}
	var match []queue.JobInfo
	for _, j := range jobs {
		if len(opts.mismatch(j)) == 0 {
			match = append(match, j)
		}
	}
	if len(match) > 0 {
		t.Fatalf("leaseholdtest: %d job(s) of kind %q enqueued %s, want none:\n%s", len(match), kind, opts, list(match, nil))
	}
}

// Expected is one job RequireManyEnqueued expects.
type Expected struct {
	// Kind is the job's kind (queue.Args.Kind). Required.
	Kind string
	// Opts narrow the job as in RequireEnqueued; their State is ignored
	// (RequireManyEnqueued looks at pending jobs). Defaults to any job of
	// the kind.
	Opts *RequireOpts
}

// RequireManyEnqueued fails the test unless the pending jobs of the kinds
// named in want are, in id (enqueue) order, exactly as many as want, each
// of the kind of its place in want and matching its Opts; it returns them.
// Pending jobs of other kinds are ignored. The failure message lists the
// jobs found against the jobs expected.
func RequireManyEnqueued(ctx context.Context, t testing.TB, db *leasehold.DB, want []Expected) []queue.JobInfo {
	t.Helper()
	return RequireManyEnqueuedTx(ctx, t, db, db.Pool(), want)
}

// RequireManyEnqueuedTx is RequireManyEnqueued reading on q: a transaction
// or a connection.
func RequireManyEnqueuedTx(ctx context.Context, t testing.TB, db *leasehold.DB, q fence.Querier, want []Expected) []queue.JobInfo {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("leaseholdtest: RequireManyEnqueued: no job expected (use RequireNotEnqueued)")
		return nil
	}
	var found []queue.JobInfo
	seen := map[string]bool{}
	for i, w := range want {
		if w.Kind == "" {
			t.Fatalf("leaseholdtest: RequireManyEnqueued: expected job %d has no Kind", i)
			return nil
		}
		if seen[w.Kind] {
			continue
		}
		seen[w.Kind] = true
		jobs, ok := jobsOf(ctx, t, db, q, w.Kind)
		if !ok {
			return nil
		}
		for _, j := range jobs {
			if j.State == queue.StatePending {
				found = append(found, j)
			}
		}
	}
	slices.SortFunc(found, func(a, b queue.JobInfo) int { return cmp.Compare(a.ID, b.ID) })
	var problems []string
	for i := range max(len(want), len(found)) {
		switch {
		case i >= len(found):
			problems = append(problems, fmt.Sprintf("  expected job %d: kind %q %s: missing", i, want[i].Kind, want[i].Opts))
		case i >= len(want):
			problems = append(problems, fmt.Sprintf("  job %d (%s): not expected", found[i].ID, describe(found[i])))
		case found[i].Kind != want[i].Kind:
			problems = append(problems, fmt.Sprintf("  expected job %d: kind %q, found job %d of kind %q (%s)", i, want[i].Kind, found[i].ID, found[i].Kind, describe(found[i])))
		default:
			o := pendingOpts(want[i].Opts)
			if m := o.mismatch(found[i]); len(m) > 0 {
				problems = append(problems, fmt.Sprintf("  expected job %d: kind %q %s, found job %d (%s): %s", i, want[i].Kind, o, found[i].ID, describe(found[i]), strings.Join(m, "; ")))
			}
		}
	}
	if len(problems) > 0 {
		kinds := slices.Sorted(maps.Keys(seen))
		t.Fatalf("leaseholdtest: the pending jobs of kinds %q are not as expected: %d found, %d expected:\n%s",
			kinds, len(found), len(want), strings.Join(problems, "\n"))
		return nil
	}
	return found
}

// pendingOpts is o for RequireManyEnqueued: its state is always pending.
func pendingOpts(o *RequireOpts) *RequireOpts {
	c := RequireOpts{}
	if o != nil {
		c = *o
	}
	c.State = queue.StatePending
	return &c
}

// jobsOf reads the jobs of kind, failing the test on an error.
func jobsOf(ctx context.Context, t testing.TB, db *leasehold.DB, q fence.Querier, kind string) ([]queue.JobInfo, bool) {
	t.Helper()
	if db == nil || db.Pool() == nil || q == nil {
		t.Fatalf("leaseholdtest: a nil *leasehold.DB or querier")
		return nil, false
	}
	v, err := queuehook.Jobs(ctx, db, q, kind, maxJobs+1)
	if err != nil {
		t.Fatalf("leaseholdtest: read the jobs of kind %q: %v", kind, err)
		return nil, false
	}
	js, _ := v.([]queue.JobInfo)
	if len(js) > maxJobs {
		t.Fatalf("leaseholdtest: more than %d jobs of kind %q (in any state) in schema %s: "+
			"the assertions read at most %d jobs of a kind, and would judge on some of them only", maxJobs, kind, db.Schema(), maxJobs)
		return nil, false
	}
	return js, true
}

// mismatch returns how j differs from what o asks for; none: a match.
func (o *RequireOpts) mismatch(j queue.JobInfo) []string {
	if o == nil {
		o = &RequireOpts{}
	}
	var m []string
	state := o.State
	if state == "" {
		state = queue.StatePending
	}
	if j.State != state {
		m = append(m, fmt.Sprintf("state %s, not %s", j.State, state))
	}
	if o.Group != "" && j.Group != o.Group {
		m = append(m, fmt.Sprintf("group %q, not %q", j.Group, o.Group))
	}
	if o.Key != "" && j.Key != o.Key {
		m = append(m, fmt.Sprintf("key %q, not %q", j.Key, o.Key))
	}
	if o.UniqueKey != "" && j.UniqueKey != o.UniqueKey {
		m = append(m, fmt.Sprintf("unique key %q, not %q", j.UniqueKey, o.UniqueKey))
	}
	if o.MaxAttempts != 0 && j.MaxAttempts != o.MaxAttempts {
		m = append(m, fmt.Sprintf("max attempts %d, not %d", j.MaxAttempts, o.MaxAttempts))
	}
	if !o.RunAfter.IsZero() && j.RunAt.Before(o.RunAfter) {
		m = append(m, fmt.Sprintf("runs at %s, before %s", j.RunAt.Format(time.RFC3339Nano), o.RunAfter.Format(time.RFC3339Nano)))
	}
	if !o.RunBefore.IsZero() && j.RunAt.After(o.RunBefore) {
		m = append(m, fmt.Sprintf("runs at %s, after %s", j.RunAt.Format(time.RFC3339Nano), o.RunBefore.Format(time.RFC3339Nano)))
	}
	if o.Args != nil {
		if want, ok := sameJSON(j.Args, o.Args); !ok {
			m = append(m, fmt.Sprintf("args %s, not %s", compact(j.Args), want))
		}
	}
	return m
}

// sameJSON reports whether stored and args encoded are the same JSON value,
// and returns args encoded.
func sameJSON(stored []byte, args queue.Args) (string, bool) {
	b, err := json.Marshal(args)
	if err != nil {
		return fmt.Sprintf("%v (does not encode: %v)", args, err), false
	}
	var x, y any
	dx, dy := json.NewDecoder(bytes.NewReader(stored)), json.NewDecoder(bytes.NewReader(b))
	dx.UseNumber()
	dy.UseNumber()
	if dx.Decode(&x) != nil || dy.Decode(&y) != nil {
		return string(b), false
	}
	return string(b), reflect.DeepEqual(x, y)
}

// String describes what o asks for, for failure messages.
func (o *RequireOpts) String() string {
	c := pendingOpts(nil)
	if o != nil {
		c = o
	}
	state := c.State
	if state == "" {
		state = queue.StatePending
	}
	parts := []string{"state " + string(state)}
	if c.Group != "" {
		parts = append(parts, fmt.Sprintf("group %q", c.Group))
	}
	if c.Key != "" {
		parts = append(parts, fmt.Sprintf("key %q", c.Key))
	}
	if c.UniqueKey != "" {
		parts = append(parts, fmt.Sprintf("unique key %q", c.UniqueKey))
	}
	if c.MaxAttempts != 0 {
		parts = append(parts, fmt.Sprintf("max attempts %d", c.MaxAttempts))
	}
	if !c.RunAfter.IsZero() {
		parts = append(parts, "running at or after "+c.RunAfter.Format(time.RFC3339Nano))
	}
	if !c.RunBefore.IsZero() {
		parts = append(parts, "running at or before "+c.RunBefore.Format(time.RFC3339Nano))
	}
	if c.Args != nil {
		b, _ := sameJSON(nil, c.Args)
		parts = append(parts, "args "+b)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// describe shows the fields of j the assertions look at.
func describe(j queue.JobInfo) string {
	s := fmt.Sprintf("%s, group %q", j.State, j.Group)
	if j.Key != "" {
		s += fmt.Sprintf(", key %q", j.Key)
	}
	if j.UniqueKey != "" {
		s += fmt.Sprintf(", unique key %q", j.UniqueKey)
	}
	return s + fmt.Sprintf(", runs at %s, args %s", j.RunAt.Format(time.RFC3339Nano), compact(j.Args))
}

// compact returns stored JSON without the spaces the database adds, to
// compare by eye with json.Marshal's.
func compact(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// list lists jobs (at most maxListed), each with how it differs from o
// when o is not nil.
func list(jobs []queue.JobInfo, o *RequireOpts) string {
	var b strings.Builder
	for i, j := range jobs {
		if i == maxListed {
			fmt.Fprintf(&b, "  ... and %d more\n", len(jobs)-maxListed)
			break
		}
		fmt.Fprintf(&b, "  job %d (%s)", j.ID, describe(j))
		if o != nil {
			fmt.Fprintf(&b, ": %s", strings.Join(o.mismatch(j), "; "))
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// nearMisses says what was found instead of a match: the jobs of the kind
// with how each differs, or the pending jobs of other kinds.
func nearMisses(ctx context.Context, db *leasehold.DB, q fence.Querier, kind string, jobs []queue.JobInfo, o *RequireOpts) string {
	if len(jobs) > 0 {
		return fmt.Sprintf("%d job(s) of the kind differ:\n%s", len(jobs), list(jobs, o))
	}
	kinds, err := queuehook.PendingKinds(ctx, db, q)
	if err != nil {
		return fmt.Sprintf("no job of the kind at all (pending jobs of other kinds unknown: %v)", err)
	}
	if len(kinds) == 0 {
		return "no job of the kind at all, and no pending job of any kind"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		parts = append(parts, fmt.Sprintf("%q (%d)", k, kinds[k]))
	}
	return "no job of the kind at all; pending jobs of other kinds: " + strings.Join(parts, ", ")
}

// kindOf returns the kind of T; for a pointer type, of a new value, since
// Kind may not accept a nil receiver.
func kindOf[T queue.Args]() string {
	var zero T
	if t := reflect.TypeOf(zero); t != nil && t.Kind() == reflect.Pointer {
		return reflect.New(t.Elem()).Interface().(queue.Args).Kind()
	}
	return zero.Kind()
}
