package main

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
	// Ordering is "strict" (the default when absent or "") or
	// "non-blocking".
	Ordering string `json:"ordering"`
}

// inputJob is a job read from the input, before the database clock turns
// its delay into a run-at time.
type inputJob struct {
	line  int // 1-based line number; 0 for a job given by flags
	job   queue.Job
	delay time.Duration // run at the database's now + delay; with job.RunAt zero
}

// errBadInput is wrapped by every error about malformed input.
var errBadInput = errors.New("bad input")

// lineError reports a malformed input line; nothing of the input is
// enqueued.
type lineError struct {
	Line   int // 0 for a job given by flags
	Reason string
	Err    error // the underlying error, if any (a *queue.JobError)
}

func (e *lineError) Error() string {
	if e.Line == 0 { // a job given by flags
		return e.Reason + " (nothing was enqueued)"
	}
	return fmt.Sprintf("line %d: %s (nothing was enqueued)", e.Line, e.Reason)
}

// Unwrap returns errBadInput and the underlying error.
func (e *lineError) Unwrap() []error {
	if e.Err != nil {
		return []error{errBadInput, e.Err}
	}
	return []error{errBadInput}
}

// maxLine is the longest input line accepted.
const maxLine = 16 << 20

// readJobs reads every line of r, a JSON object per job, and checks them
// all before anything is enqueued. group is the group of lines that name
// none. Blank lines are skipped.
func readJobs(r io.Reader, group string) ([]inputJob, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var jobs []inputJob
	n := 0
	for sc.Scan() {
		n++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		j, err := parseLine(text, group)
		if err != nil {
			return nil, &lineError{Line: n, Reason: err.Error()}
		}
		j.line = n
		jobs = append(jobs, j)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &lineError{Line: n + 1, Reason: fmt.Sprintf("longer than %d MiB", maxLine>>20)}
		}
		return nil, fmt.Errorf("reading standard input after line %d: %w (nothing was enqueued)", n, err)
	}
	return jobs, nil
}

func parseLine(text []byte, group string) (inputJob, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	var l enqueueLine
	if text[0] != '{' {
		return inputJob{}, errors.New(`not a JSON object (want {"group":…,"kind":…,"key":…,"args":{…}})`)
	}
	if err := dec.Decode(&l); err != nil {
		return inputJob{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return inputJob{}, errors.New("invalid JSON: more than one value on the line")
	}
	if l.Group == "" {
		l.Group = group
	}
	var runAt time.Time
	if l.RunAt != nil {
		runAt = *l.RunAt
	}
	ord, err := orderingOf("ordering", l.Ordering)
	if err != nil {
		return inputJob{}, err
	}
	return jobOf(l.Group, l.Kind, l.Key, ord, l.Args, runAt, l.Delay, l.MaxAttempts, l.UniqueKey)
}

// jobOf checks a job's fields that need no database and returns it.
func jobOf(group, kind, key string, ordering queue.Ordering, args json.RawMessage, runAt time.Time, delay string,
	maxAttempts int, uniqueKey string) (inputJob, error) {
	switch {
	case group == "":
		return inputJob{}, errors.New("no group (give \"group\", or --group for every line)")
	case kind == "":
		return inputJob{}, errors.New("no kind")
	case maxAttempts < 0 || maxAttempts > queue.MaxAttempts:
		return inputJob{}, fmt.Errorf("max attempts %d is not in 1..%d", maxAttempts, queue.MaxAttempts)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	} else if !json.Valid(args) {
		return inputJob{}, fmt.Errorf("args %q are not JSON", args)
	}
	j := inputJob{job: queue.Job{Group: group, Key: key, Ordering: ordering, Args: rawArgs{kind, args}, RunAt: runAt,
		MaxAttempts: maxAttempts, UniqueKey: uniqueKey}}
	if delay != "" {
		if !runAt.IsZero() {
			return inputJob{}, errors.New("both a run-at time and a delay")
		}
		d, err := time.ParseDuration(delay)
		if err != nil || d < 0 {
			return inputJob{}, fmt.Errorf("delay %q is not a non-negative duration (e.g. 90s, 5m, 1h)", delay)
		}
		j.delay = d
	}
	return j, nil
}
