package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/demo"
)

// newDemoCmd is `leasehold demo`: internal/demo's story, told as it
// happens, then its report.
func newDemoCmd(opts *rootOptions) *cobra.Command {
	var (
		url    string
		asJSON bool
		withUI bool
		uiAddr string
		cfg    demo.Config
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch three workers run jobs through a crash and a pause, exactly once (about 15s)",
		Long: fmt.Sprintf("demo runs three workers in this process on one group of %d partitions and feeds them\n"+
			"%d jobs, whose handler appends a ledger row inside the job's fenced transaction. Midway,\n"+
			"worker-1 crashes (its connections cut, never stopped) and the others take its partitions\n"+
			"over once its leases expire; then worker-2 pauses mid-job past its lease, and its late\n"+
			"commits are refused by the fencing token. The chaos suite's checker then reads the\n"+
			"ledger, the jobs, the workers' histories and the lease audit: every job applied exactly\n"+
			"once, no stale commit accepted. --kafka tells the same pause on an in-process Kafka topic.\n"+
			"Without --database-url or $DATABASE_URL it runs on a throwaway PostgreSQL cluster started\n"+
			"from the installed server binaries; on an existing server it uses, and drops at the start\n"+
			"and the end, the schema %s. --ui serves the web UI on the demo's database while it runs,\n"+
			"and after the report until interrupted.", demo.Partitions, demo.Jobs, demo.Schema),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, name := range []string{"ui-addr", "ui-allow-actions"} {
				if cmd.Flags().Changed(name) && !withUI {
					return usageErr(cmd, "--"+name+" without --ui")
				}
			}
			story := cmd.OutOrStdout()
			if asJSON {
				story = cmd.ErrOrStderr()
			}
			d := &display{w: story, tty: isTerminal(story), start: time.Now()}
			cfg.DatabaseURL, cfg.Events, cfg.Logger = databaseURL(url), d.show, opts.logger(cmd.ErrOrStderr())
			report := func(rep demo.Report) error {
				if asJSON {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
				}
				printDemo(cmd.OutOrStdout(), rep)
				return nil
			}
			var (
				held    bool  // the report was printed by Hold
				printed error // and this is what printing it returned
			)
			if withUI {
				cfg.UIAddr = uiAddr
				// After the report, the UI keeps serving the final state
				// until interrupted: then the demo's schema is dropped.
				cfg.Hold = func(ctx context.Context, rep demo.Report) {
					d.clearBar()
					held, printed = true, report(rep)
					fmt.Fprintf(story, "\nThe web UI still serves the final state at %s\n"+
						"Interrupt (Ctrl-C) to stop it; the demo's database is dropped then.\n", rep.UI)
					<-ctx.Done()
				}
			}
			rep, err := demo.Run(cmd.Context(), cfg)
			d.clearBar()
			if err != nil {
				return err
			}
			if held {
				err = printed
			} else {
				err = report(rep)
			}
			if v := rep.Violations; err == nil && !rep.OK {
				if len(v) > 3 {
					v = append(v[:3:3], fmt.Sprintf("and %d more (see the report)", len(v)-3))
				}
				err = fmt.Errorf("demo: invariants violated: %s", strings.Join(v, "; "))
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "database-url", "",
		"use this PostgreSQL server (schema "+demo.Schema+") instead of a throwaway cluster (default $DATABASE_URL)")
	f.BoolVar(&cfg.Kafka, "kafka", false, "show Kafka partitions consumed exactly once into PostgreSQL, and a zombie consumer refused (in-process Kafka)")
	f.BoolVar(&asJSON, "json", false, "print the final report as one JSON object (the story goes to stderr)")
	f.BoolVar(&withUI, "ui", false, "serve the web UI on the demo's database while it runs, and after the report until interrupted")
	f.StringVar(&uiAddr, "ui-addr", defaultUIAddr, "with --ui: serve the web UI on this host:port (a port of 0 picks a free one)")
	f.BoolVar(&cfg.UIActions, "ui-allow-actions", false, "with --ui: offer the UI's actions (a job cancelled mid-story is reported by the checker)")
	f.BoolVar(&cfg.Unfenced, "unfenced", false, "control run: apply effects outside the fence; the report must find violations")
	_ = f.MarkHidden("unfenced")
	return cmd
}

// display prints the story: steps stamped with the time since the start,
// details as they are, and the progress as a bar redrawn in place under
// the story on a terminal, and as a plain line now and then otherwise.
type display struct {
	w         io.Writer
	tty       bool
	start     time.Time
	bar       string    // the bar drawn under the story, on a terminal
	lastPlain time.Time // when the bar was last printed as a plain line
}

func (d *display) show(e demo.Event) {
	switch e.Kind {
	case demo.Progress:
		const width = 30
		filled := min(width, max(0, e.Done*width/max(e.Total, 1)))
		bar := fmt.Sprintf("        [%s%s] %4d/%d applied, %d produced",
			strings.Repeat("#", filled), strings.Repeat(".", width-filled), e.Done, e.Total, e.Items)
		if d.tty {
			d.bar = bar
			fmt.Fprint(d.w, "\r\033[K"+bar)
		} else if time.Since(d.lastPlain) >= 2*time.Second {
			d.lastPlain = time.Now()
			fmt.Fprintln(d.w, bar)
		}
	case demo.Step:
		d.line(fmt.Sprintf("%6.2fs  %s", time.Since(d.start).Seconds(), e.Text))
	default:
		d.line(e.Text)
	}
}

func (d *display) line(s string) {
	if d.bar != "" {
		fmt.Fprint(d.w, "\r\033[K")
	}
	fmt.Fprintln(d.w, s)
	if d.bar != "" {
		fmt.Fprint(d.w, d.bar)
	}
}

// clearBar removes the progress bar from a terminal.
func (d *display) clearBar() {
	if d.bar != "" {
		fmt.Fprint(d.w, "\r\033[K")
	}
	d.bar = ""
}

// printDemo writes the report for people.
func printDemo(w io.Writer, r demo.Report) {
	fmt.Fprintln(w, "\nReport (the chaos checker's: ledger, jobs, workers' histories and lease audit)")
	rows := checkRows(r.Result, r.Story)
	rows = append(rows, [2]string{"refused late commits", fmt.Sprintf("%d (of the paused worker, after the takeover)", r.Refused)})
	if r.Story == "queue" {
		rows = append(rows, [2]string{"failover after a crash", fmt.Sprintf("%d ms (crash to every partition held again; a lease expires %v after its last renewal)", r.FailoverMS, demo.TTL)})
	}
	rows = append(rows, [2]string{"takeover after a pause", fmt.Sprintf("%d ms (pause to every partition held by the others)", r.PauseTakeoverMS)},
		[2]string{"tokens per partition", tokenSummary(r.Tokens, r.TokenViolations == 0)})
	for _, row := range rows {
		fmt.Fprintf(w, "  %-30s %s\n", row[0], row[1])
	}
	if r.OK {
		fmt.Fprintln(w, "All invariants hold: everything applied exactly once, in key order; every stale commit refused.")
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATED: %s\n", v)
	}
}

// tokenSummary describes the partitions' token histories, with the
// partition that changed hands most as an example.
func tokenSummary(tokens map[int][]int64, ok bool) string {
	best, grants := -1, 0
	for p, toks := range tokens {
		grants += len(toks)
		if best < 0 || len(toks) > len(tokens[best]) || (len(toks) == len(tokens[best]) && p < best) {
			best = p
		}
	}
	if best < 0 {
		return "no grants"
	}
	toks := make([]string, len(tokens[best]))
	for i, t := range tokens[best] {
		toks[i] = fmt.Sprint(t)
	}
	verdict := "strictly increasing"
	if !ok {
		verdict = "NOT all strictly increasing"
	}
	return fmt.Sprintf("%s over %d grants; e.g. partition %d: %s", verdict, grants, best, strings.Join(toks, " < "))
}
