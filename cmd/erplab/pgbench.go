package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/pgbench/cli"
)

// newPgbenchCmd is `erplab pgbench`: pgbench's own command line, parsed
// like pgbench's getopt_long (not by cobra), run on erplab's engine.
func newPgbenchCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pgbench [OPTION]... [DBNAME]",
		Short: "Run pgbench's command line unchanged on erplab's engine (alias pgbench='erplab pgbench')",
		Long: `Run a pgbench 15-17 command line unchanged (plus pgbench 18's --continue-on-error):
initialization (-i) and benchmark runs, with pgbench's output line for line, then erplab's
additions (percentiles, APDEX per script, the results document), each line starting
with "erplab:". ERPLAB_PGBENCH_OUT places the document: unset, ./erplab-results/<time>-pgbench.json;
"none", no document; a directory (or a value ending in /), time-stamped files in it; a file,
replaced by every run. A document that cannot be written is one warning line, never a failure. Exit codes are pgbench's: 0, 1 for option, script and connection errors,
2 when a client aborted; a run or -i stopped by SIGINT, SIGTERM or SIGHUP exits as the shell
reports pgbench killed by it, 128 + the signal (130, 143, 129), after the partial report.
'erplab pgbench --help' lists pgbench's options.`,
		DisableFlagParsing: true,
		SilenceUsage:       true,
		// Its flags are not cobra's: the generated page shows its --help.
		Annotations: map[string]string{helpAnnotation: cli.Usage},
		RunE: func(cmd *cobra.Command, args []string) error {
			code := cli.Main(cmd.Context(), args, cli.Streams{Stdin: os.Stdin, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()},
				os.Getenv, cli.Program{Version: version, Out: os.Getenv("ERPLAB_PGBENCH_OUT")})
			if i := exitcode.InterruptionOf(cmd.Context()); i != nil && code == 1 {
				// A failure while connecting or setting up is the
				// signal's consequence: exit as pgbench killed by it.
				code = int(i.ExitCode())
			}
			if code != 0 {
				return exitcode.With(exitcode.Code(code), errSilent)
			}
			return nil
		},
	}
}
