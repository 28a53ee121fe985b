package admin

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// Lines are numbered as given, blank ones skipped, and a line without a
// group takes the default one.
func TestReadJobsNumbersLinesAndDefaultsTheGroup(t *testing.T) {
	in := `{"kind":"a","key":"k1","args":{"n":1}}

  {"group":"other","kind":"b","delay":"30s","ordering":"non-blocking"}` + "\r\n" +
		`{"kind":"c","run_at":"2030-01-01T00:00:00Z","max_attempts":2,"unique_key":"u"}` + "\n"
	jobs, err := ReadJobs(strings.NewReader(in), "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 {
		t.Fatalf("%d jobs; want 3: %+v", len(jobs), jobs)
	}
	type got struct {
		line             int
		group, kind      string
		ordering         queue.Ordering
		delay            time.Duration
		maxAttempts      int
		runAt, uniqueKey string
	}
	want := []got{
		{1, "g", "a", queue.OrderStrict, 0, 0, "", ""},
		{3, "other", "b", queue.OrderNonBlocking, 30 * time.Second, 0, "", ""},
		{4, "g", "c", queue.OrderStrict, 0, 2, "2030-01-01T00:00:00Z", "u"},
	}
	for i, j := range jobs {
		g := got{j.Line, j.Job.Group, j.Job.Args.Kind(), j.Job.Ordering, j.Delay, j.Job.MaxAttempts, "", j.Job.UniqueKey}
		if !j.Job.RunAt.IsZero() {
			g.runAt = j.Job.RunAt.UTC().Format(time.RFC3339)
		}
		if g != want[i] {
			t.Errorf("job %d: %+v; want %+v", i, g, want[i])
		}
	}
	if b, err := json.Marshal(jobs[0].Job.Args); err != nil || string(b) != `{"n":1}` {
		t.Errorf("args passed through as %s (%v)", b, err)
	}
	if b, err := json.Marshal(jobs[1].Job.Args); err != nil || string(b) != `{}` {
		t.Errorf("absent args are %s (%v); want {}", b, err)
	}
}

// A malformed line is a *LineError naming it and wrapping ErrBadInput.
func TestReadJobsReportsTheMalformedLine(t *testing.T) {
	good := `{"group":"g","kind":"a"}` + "\n"
	for _, tc := range []struct {
		in   string
		line int
		want string
	}{
		{good + `{"group":"g","kind":"a",`, 2, "invalid JSON"},
		{good + good + `{"group":"g"}`, 3, "no kind"},
		{`{"kind":"a"}`, 1, "no group"},
		{`{"group":"g","kind":"a","runat":"x"}`, 1, "unknown field"},
		{`["g","a"]`, 1, "not a JSON object"},
		{`{"group":"g","kind":"a"} {}`, 1, "more than one value"},
		{`{"group":"g","kind":"a","delay":"-1s"}`, 1, "non-negative duration"},
		{`{"group":"g","kind":"a","delay":"1s","run_at":"2030-01-01T00:00:00Z"}`, 1, "both"},
		{`{"group":"g","kind":"a","max_attempts":-1}`, 1, "max attempts"},
		{`{"group":"g","kind":"a","key":"k","ordering":"fifo"}`, 1, `ordering "fifo" is not strict or non-blocking`},
		{good + `{"group":"g","kind":"` + strings.Repeat("x", maxLine) + `"}`, 2, "longer than 16 MiB"},
	} {
		_, err := ReadJobs(strings.NewReader(tc.in), "")
		var le *LineError
		if !errors.As(err, &le) || le.Line != tc.line || !strings.Contains(err.Error(), tc.want) ||
			!errors.Is(err, ErrBadInput) || !strings.HasSuffix(err.Error(), "(nothing was enqueued)") {
			t.Errorf("input %.60q: %v; want a line %d error about %q", tc.in, err, tc.line, tc.want)
		}
	}
}

// The flags describe one job; their errors wrap ErrBadInput and name the
// flag at fault.
func TestJobFlagsDescribeOneJobOrNameTheFlagAtFault(t *testing.T) {
	ok := JobFlags{Group: "g", Kind: "k", Key: "a", Ordering: "non-blocking", Args: `{"x":1}`,
		Delay: time.Minute, DelaySet: true, MaxAttempts: 3, UniqueKey: "u"}
	j, err := ok.Job()
	if err != nil {
		t.Fatal(err)
	}
	if j.Line != 0 || j.Delay != time.Minute || j.Job.Ordering != queue.OrderNonBlocking || j.Job.MaxAttempts != 3 ||
		j.Job.Key != "a" || j.Job.UniqueKey != "u" || j.Job.Args.Kind() != "k" {
		t.Errorf("job %+v", j)
	}
	for _, tc := range []struct {
		change func(*JobFlags)
		want   string
	}{
		{func(f *JobFlags) { f.Group = "" }, "--group and --kind are required"},
		{func(f *JobFlags) { f.Kind = "" }, "--group and --kind are required"},
		{func(f *JobFlags) { f.Args = `{"a":` }, "not JSON"},
		{func(f *JobFlags) { f.DelaySet, f.Delay, f.RunAt = false, 0, "tomorrow" }, "RFC 3339"},
		{func(f *JobFlags) { f.RunAt = "2030-01-02T03:04:05Z" }, "exclude each other"},
		{func(f *JobFlags) { f.Delay = -time.Minute }, "--delay -1m0s is negative"},
		{func(f *JobFlags) { f.MaxAttempts = -1 }, "--max-attempts -1 is negative"},
		{func(f *JobFlags) { f.Ordering = "Strict" }, `--ordering "Strict" is not strict or non-blocking`},
	} {
		f := ok
		tc.change(&f)
		if _, err := f.Job(); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("flags %+v: %v; want a bad input error about %q", f, err, tc.want)
		}
	}
}
