package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/internal/admin"
)

// usageErr is an error about the command line: msg, then the command's
// usage line. It wraps admin.ErrBadInput.
func usageErr(cmd *cobra.Command, msg string) error {
	return fmt.Errorf("%w: %s\nusage: %s (see --help)", admin.ErrBadInput, msg, cmd.UseLine())
}

// exactArgs accepts n positional arguments, what they are; otherwise it is
// a usage error.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErr(cmd, fmt.Sprintf("%s: %d argument(s) given, want %d", what, len(args), n))
		}
		return nil
	}
}

// rangeArgs accepts from min to max positional arguments, what they are;
// otherwise it is a usage error.
func rangeArgs(min, max int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return usageErr(cmd, fmt.Sprintf("%s: %d argument(s) given, want %d to %d", what, len(args), min, max))
		}
		return nil
	}
}

// minArgs accepts at least n positional arguments, what they are; otherwise
// it is a usage error.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usageErr(cmd, fmt.Sprintf("no %s given", what))
		}
		return nil
	}
}

// flagError turns the errors of flag parsing into usage errors, saying what
// a flag takes instead of quoting strconv.
func flagError(cmd *cobra.Command, err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return usageErr(cmd, err.Error())
	}
	f := ive.GetFlag()
	want := "a valid " + f.Value.Type()
	switch f.Value.Type() {
	case "int", "int64", "int32":
		want = "an integer"
	case "intSlice":
		want = "integers (repeat the flag, or separate them with commas)"
	case "duration":
		want = "a duration such as 500ms, 90s, 5m or 1h"
	case "bool":
		want = "true or false"
	}
	return usageErr(cmd, fmt.Sprintf("--%s %q: want %s", f.Name, ive.GetValue(), want))
}
