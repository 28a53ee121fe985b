package admin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// InputJob is a job read from the input, before the database clock turns
// its delay into a run-at time.
type InputJob struct {
	// Line is the 1-based input line; 0 for a job given by flags.
	Line int
	// Job is the job to enqueue.
	Job queue.Job
	// Delay makes the job due this long after the database's now, when
	// Enqueue enqueues it; Job.RunAt is zero then.
	Delay time.Duration
}

// rawArgs are a job's arguments as given on the command line: a kind and
// JSON, passed through unchanged.
type rawArgs struct {
	kind string
	raw  json.RawMessage
}

// Kind returns the job's kind.
func (a rawArgs) Kind() string { return a.kind }

// MarshalJSON returns the arguments as given.
func (a rawArgs) MarshalJSON() ([]byte, error) { return a.raw, nil }

// enqueueLine is one JSON line of `leasehold enqueue --stdin`.
type enqueueLine struct {
	Group       string          `json:"group"`
	Kind        string          `json:"kind"`
	Key         string          `json:"key"`
	Args        json.RawMessage `json:"args"`
	RunAt       *time.Time      `json:"run_at"`
	Delay       string          `json:"delay"`
	MaxAttempts int             `json:"max_attempts"`
	UniqueKey   string          `json:"unique_key"`
	// Priority is 1 (the default when absent or 0, first) to 4.
	Priority int `json:"priority"`
	// Ordering is "strict" (the default when absent or "") or
	// "non-blocking".
	Ordering string `json:"ordering"`
}

// maxLine is the longest input line ReadJobs accepts.
const maxLine = 16 << 20

// ReadJobs reads every line of r, a JSON object per job, and checks them
// all before anything is enqueued. group is the group of lines that name
// none. Blank lines are skipped. A malformed line is a *LineError.
func ReadJobs(r io.Reader, group string) ([]InputJob, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var jobs []InputJob
	n := 0
	for sc.Scan() {
		n++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		j, err := parseLine(text, group)
		if err != nil {
			return nil, &LineError{Line: n, Reason: err.Error()}
		}
		j.Line = n
		jobs = append(jobs, j)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &LineError{Line: n + 1, Reason: fmt.Sprintf("longer than %d MiB", maxLine>>20)}
		}
		return nil, fmt.Errorf("reading standard input after line %d: %w (nothing was enqueued)", n, err)
	}
	return jobs, nil
}

func parseLine(text []byte, group string) (InputJob, error) {
	var l enqueueLine
	if err := decodeObject(text, &l, `{"group":…,"kind":…,"key":…,"args":{…}}`); err != nil {
		return InputJob{}, err
	}
	if l.Group == "" {
		l.Group = group
	}
	var runAt time.Time
	if l.RunAt != nil {
		runAt = *l.RunAt
	}
	ord, err := ParseOrdering("ordering", l.Ordering)
	if err != nil {
		return InputJob{}, err
	}
	j, err := jobOf(l.Group, l.Kind, l.Key, ord, l.Args, runAt, l.Delay, l.MaxAttempts, l.UniqueKey)
	j.Job.Priority = l.Priority // checked by the queue, with the line's number
	return j, err
}

// decodeObject decodes text, one line holding one JSON object, into v,
// refusing fields v does not have; want shows what the line should look
// like.
func decodeObject(text []byte, v any, want string) error {
	if len(text) == 0 || text[0] != '{' {
		return fmt.Errorf("not a JSON object (want %s)", want)
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid JSON: more than one value on the line")
	}
	return nil
}

// JobFlags are the flags of `leasehold enqueue` that describe one job.
type JobFlags struct {
	// Group, Kind and Key are the job's group, kind and key (Key "" for
	// none).
	Group, Kind, Key string
	// Ordering is "strict" or "non-blocking".
	Ordering string
	// Args is the job's arguments, JSON; "" is an error (the flag's
	// default is {}).
	Args string
	// RunAt is when the job is due, RFC 3339; "" for now.
	RunAt string
	// Delay makes the job due this long after the database's now.
	Delay time.Duration
	// DelaySet reports whether --delay was given, even as 0.
	DelaySet bool
	// MaxAttempts is how many times the job may run; 0 for the queue's
	// default.
	MaxAttempts int
	// UniqueKey, if set, enqueues nothing while a pending job of the group
	// has it.
	UniqueKey string
	// Priority is 1 (first) to 4; 0 for the default, 1.
	Priority int
}

// Job checks the flags and returns the job they describe. Its errors wrap
// ErrBadInput.
func (f JobFlags) Job() (InputJob, error) {
	bad := func(err error) error { return fmt.Errorf("%w: %v", ErrBadInput, err) }
	if f.Group == "" || f.Kind == "" {
		return InputJob{}, bad(errors.New("--group and --kind are required (or - / --stdin to read jobs from standard input)"))
	}
	var at time.Time
	if f.RunAt != "" {
		var err error
		if at, err = time.Parse(time.RFC3339Nano, f.RunAt); err != nil {
			return InputJob{}, bad(fmt.Errorf("--run-at %q is not an RFC 3339 time (e.g. 2026-12-01T09:00:00Z)", f.RunAt))
		}
	}
	if f.DelaySet && f.RunAt != "" {
		return InputJob{}, bad(errors.New("--run-at and --delay exclude each other"))
	}
	if f.Delay < 0 {
		return InputJob{}, bad(fmt.Errorf("--delay %v is negative", f.Delay))
	}
	if f.MaxAttempts < 0 {
		return InputJob{}, bad(fmt.Errorf("--max-attempts %d is negative", f.MaxAttempts))
	}
	ord, err := ParseOrdering("--ordering", f.Ordering)
	if err != nil {
		return InputJob{}, bad(err)
	}
	if f.Args == "" {
		return InputJob{}, bad(errors.New("--args is empty; use '{}' for a job without arguments"))
	}
	j, err := jobOf(f.Group, f.Kind, f.Key, ord, json.RawMessage(f.Args), at, "", f.MaxAttempts, f.UniqueKey)
	if err != nil {
		return InputJob{}, bad(err)
	}
	j.Delay = f.Delay
	if f.Priority < 0 || f.Priority > queue.MaxPriority {
		return InputJob{}, bad(fmt.Errorf("--priority %d is not in 1..%d", f.Priority, queue.MaxPriority))
	}
	j.Job.Priority = f.Priority
	return j, nil
}

// jobOf checks a job's fields that need no database and returns it.
func jobOf(group, kind, key string, ordering queue.Ordering, args json.RawMessage, runAt time.Time, delay string,
	maxAttempts int, uniqueKey string) (InputJob, error) {
	switch {
	case group == "":
		return InputJob{}, errors.New("no group (give \"group\", or --group for every line)")
	case kind == "":
		return InputJob{}, errors.New("no kind")
	case maxAttempts < 0 || maxAttempts > queue.MaxAttempts:
		return InputJob{}, fmt.Errorf("max attempts %d is not in 1..%d", maxAttempts, queue.MaxAttempts)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	} else if !json.Valid(args) {
		return InputJob{}, fmt.Errorf("args %q are not JSON", args)
	}
	j := InputJob{Job: queue.Job{Group: group, Key: key, Ordering: ordering, Args: rawArgs{kind, args}, RunAt: runAt,
		MaxAttempts: maxAttempts, UniqueKey: uniqueKey}}
	if delay != "" {
		if !runAt.IsZero() {
			return InputJob{}, errors.New("both a run-at time and a delay")
		}
		d, err := time.ParseDuration(delay)
		if err != nil || d < 0 {
			return InputJob{}, fmt.Errorf("delay %q is not a non-negative duration (e.g. 90s, 5m, 1h)", delay)
		}
		j.Delay = d
	}
	return j, nil
}
