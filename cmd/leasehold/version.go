package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build and the schema version it knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			if asJSON {
				return printJSON(w, map[string]any{"version": moduleVersion(),
					"schema_version": leasehold.LatestSchemaVersion(), "go": runtime.Version()})
			}
			fmt.Fprintf(w, "leasehold %s\n", moduleVersion())
			fmt.Fprintf(w, "schema version %d\n", leasehold.LatestSchemaVersion())
			fmt.Fprintf(w, "built with %s\n", runtime.Version())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// moduleVersion returns the main module's version from the build info, or
// "(devel)" when it is unknown (a build from a source tree).
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
