package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// marker follows every removal's replacement text: valid as a comment in
// Go and in SQL, it makes the mutated text unique, so that restoring it
// touches nothing else in the file (other edits made meanwhile stay).
const marker = "/*mutate*/"

// Verdicts of one condition.
const (
	Caught   = "caught"   // at least one of its tests failed without it
	Survived = "SURVIVED" // every test passed without it: a gap
	Stale    = "STALE"    // its text is not in the file exactly once: update Conditions
	Broken   = "ERROR"    // the tests did not build or run (see the output)
	Unbuilt  = "SKIPPED"  // its tests failed or did not build before the removal: nothing to learn
)

func main() {
	only := flag.String("only", "", "run only the conditions whose name matches this regexp")
	list := flag.Bool("list", false, "list the conditions and exit")
	timeout := flag.Duration("timeout", 5*time.Minute, "timeout of each condition's test run")
	verbose := flag.Bool("v", false, "print each test run's output")
	baseline := flag.Bool("baseline", true, "first run each package's tests unchanged: a condition whose tests fail without a removal is SKIPPED")
	flag.Parse()
	os.Exit(run(*only, *list, *baseline, *timeout, *verbose, os.Stdout))
}

// restorer undoes the removal in effect, once, whoever gets there first:
// the run itself or the signal handler.
type restorer struct {
	mu   sync.Mutex
	undo func() error
}

func (r *restorer) set(f func() error) { r.mu.Lock(); r.undo = f; r.mu.Unlock() }

func (r *restorer) restore() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.undo == nil {
		return nil
	}
	err := r.undo()
	r.undo = nil
	return err
}

func run(only string, list, baseline bool, timeout time.Duration, verbose bool, out io.Writer) int {
	re, err := regexp.Compile(only)
	if err != nil {
		fmt.Fprintln(out, "mutate: -only:", err)
		return 2
	}
	if list {
		for _, c := range Conditions {
			fmt.Fprintf(out, "%-48s %s  %s -run %s\n", c.Name, c.File, c.Pkg, testPattern(c.Tests))
		}
		return 0
	}
	if os.Getenv("LEASEHOLD_TEST_DATABASE_URL") == "" {
		fmt.Fprintln(out, "mutate: set LEASEHOLD_TEST_DATABASE_URL (the tests need PostgreSQL)")
		return 2
	}
	// A run killed outright (SIGKILL) cannot restore: undo what it left.
	for _, c := range Conditions {
		if n, err := unmark(c); err != nil {
			fmt.Fprintf(out, "mutate: %s: %v\n", c.File, err)
			return 2
		} else if n > 0 {
			fmt.Fprintf(out, "mutate: restored %q in %s, left by an earlier run\n", c.Name, c.File)
		}
	}

	var r restorer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	interrupted := make(chan struct{})
	go func() {
		if _, ok := <-sigs; ok {
			cancel() // kills the running test's process group
			if err := r.restore(); err != nil {
				fmt.Fprintln(os.Stderr, "mutate: restore on interrupt:", err)
			}
			close(interrupted)
		}
	}()

	// The baseline: each package's tests of the conditions chosen, once,
	// unchanged. A test that fails here would pass for a catch.
	unfit := map[string]string{} // test (pkg + name): why it cannot judge
	if baseline {
		tests := map[string][]string{}
		for _, c := range Conditions {
			if re.MatchString(c.Name) {
				tests[c.Pkg] = append(tests[c.Pkg], c.Tests...)
			}
		}
		for pkg, ts := range tests {
			failed, passed, output, err := goTest(ctx, pkg, ts, timeout)
			if verbose {
				out.Write(output)
			}
			for _, t := range ts {
				switch {
				case failed[t]:
					unfit[pkg+t] = "fails unchanged"
				case !passed[t]:
					unfit[pkg+t] = "did not pass unchanged: " + firstLines(string(output), 2)
				}
			}
			if err != nil && len(failed) == 0 && len(passed) == 0 {
				fmt.Fprintf(out, "mutate: baseline of %s: %s\n", pkg, firstLines(string(output), 3))
			}
		}
	}

	fmt.Fprintf(out, "| condition | file | tests that failed without it | verdict |\n|---|---|---|---|\n")
	bad := 0
	for _, c := range Conditions {
		if !re.MatchString(c.Name) {
			continue
		}
		var why []string
		for _, t := range c.Tests {
			if u, ok := unfit[c.Pkg+t]; ok {
				why = append(why, t+" "+u)
			}
		}
		if len(why) > 0 {
			bad++
			fmt.Fprintf(out, "| %s | %s | %s | %s |\n", c.Name, c.File, strings.Join(why, "; "), Unbuilt)
			continue
		}
		verdict, detail := check(ctx, c, &r, timeout, verbose, out)
		if err := r.restore(); err != nil {
			fmt.Fprintf(out, "mutate: RESTORE FAILED for %s: %v\n", c.File, err)
			return 3
		}
		select {
		case <-interrupted:
			fmt.Fprintln(out, "mutate: interrupted; the file is restored")
			return 130
		default:
		}
		if verdict != Caught {
			bad++
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s |\n", c.Name, c.File, detail, verdict)
	}
	// A last sweep: an editor that read a file while a removal was in
	// effect and wrote it back after the restore brings the removal back.
	for _, c := range Conditions {
		if n, err := unmark(c); err != nil || n > 0 {
			fmt.Fprintf(out, "mutate: %s: removal %q found again after its restore (an edit made meanwhile?), restored: %d, %v\n",
				c.File, c.Name, n, err)
			bad++
		}
	}
	if bad > 0 {
		return 1
	}
	return 0
}

// check removes c's condition, runs its tests and reports the verdict and
// which tests failed. The removal stays in effect (r restores it).
func check(ctx context.Context, c Condition, r *restorer, timeout time.Duration, verbose bool, out io.Writer) (verdict, detail string) {
	src, err := os.ReadFile(c.File)
	if err != nil {
		return Broken, err.Error()
	}
	if n := bytes.Count(src, []byte(c.From)); n != 1 {
		return Stale, fmt.Sprintf("its text is in the file %d times, not once", n)
	}
	mutated := bytes.Replace(src, []byte(c.From), []byte(c.To+marker), 1)
	r.set(func() error { _, err := unmark(c); return err })
	if err := os.WriteFile(c.File, mutated, 0o644); err != nil {
		return Broken, err.Error()
	}
	failed, passed, output, err := goTest(ctx, c.Pkg, c.Tests, timeout)
	if verbose {
		out.Write(output)
	}
	var ran []string
	for _, t := range c.Tests {
		switch {
		case failed[t]:
			ran = append(ran, t)
		case !passed[t]:
			ran = append(ran, t+" (did not run)")
		}
	}
	detail = fmt.Sprintf("%d of %d: %s", len(failed), len(c.Tests), strings.Join(ran, ", "))
	var ee *exec.ExitError
	switch {
	case err == nil:
		return Survived, fmt.Sprintf("0 of %d", len(c.Tests))
	case len(failed) > 0:
		return Caught, detail
	case errors.As(err, &ee) || ctx.Err() != nil:
		return Broken, firstLines(string(output), 3)
	default:
		return Broken, err.Error()
	}
}

// unmark swaps c's marked replacement back to its original text wherever
// it is in c.File, and reports how many it restored.
func unmark(c Condition) (int, error) {
	src, err := os.ReadFile(c.File)
	if err != nil {
		return 0, err
	}
	n := bytes.Count(src, []byte(c.To+marker))
	if n == 0 {
		return 0, nil
	}
	return n, os.WriteFile(c.File, bytes.ReplaceAll(src, []byte(c.To+marker), []byte(c.From)), 0o644)
}

// goTest runs tests of pkg (go test -count=1 -v), in a process group of
// its own that a cancelled ctx or the timeout kills, and returns the
// top-level tests that failed and passed, and the output.
func goTest(ctx context.Context, pkg string, tests []string, timeout time.Duration) (failed, passed map[string]bool, output []byte, err error) {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, "go", "test", "-count=1", "-v", "-run", testPattern(tests), pkg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	failed, passed = results(buf.String())
	return failed, passed, buf.Bytes(), err
}

func testPattern(tests []string) string { return "^(" + strings.Join(tests, "|") + ")$" }

// results reads the top-level tests that failed and passed from go test -v
// output.
func results(out string) (failed, passed map[string]bool) {
	failed, passed = map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for prefix, m := range map[string]map[string]bool{"--- FAIL: ": failed, "--- PASS: ": passed} {
			if name, ok := strings.CutPrefix(line, prefix); ok {
				name, _, _ = strings.Cut(name, " ")
				if !strings.Contains(name, "/") {
					m[name] = true
				}
			}
		}
	}
	return failed, passed
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], " / ")
}
