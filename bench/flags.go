package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// newSuiteFlags returns the flag set of suite name: errors and the usage
// go to stderr.
func newSuiteFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run . %s [flags]\n\nflags:\n", name)
		fs.PrintDefaults()
	}
	return fs
}

// parseSuiteFlags parses args into fs; on an error fs has printed it and
// the usage, and the error is flag.ErrHelp.
func parseSuiteFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return flag.ErrHelp
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

// pickList returns the items of the comma-separated list sel, in the
// canonical order of known, or an error naming the first that is not known
// (a noun, such as "case", given by the flag flagName).
func pickList(noun, flagName, sel string, known []string) ([]string, error) {
	chosen := strings.Split(sel, ",")
	for _, c := range chosen {
		if !slices.Contains(known, c) {
			return nil, fmt.Errorf("unknown %s %q in %s (known: %s)", noun, c, flagName, strings.Join(known, ", "))
		}
	}
	var out []string
	for _, c := range known {
		if slices.Contains(chosen, c) {
			out = append(out, c)
		}
	}
	return out, nil
}
