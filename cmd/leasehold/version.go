package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build and the schema version it knows",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "leasehold %s\n", moduleVersion())
			fmt.Fprintf(w, "schema version %d\n", leasehold.LatestSchemaVersion())
			fmt.Fprintf(w, "built with %s\n", runtime.Version())
		},
	}
}

// moduleVersion returns the main module's version from the build info, or
// "(devel)" when it is unknown (a build from a source tree).
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
