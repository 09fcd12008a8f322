package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/conninfo"
)

// upstreamEnv holds the proxy's upstream DSN when neither --upstream nor
// --upstream-file is given (the PG* variables may describe the clients'
// side on the same host).
const upstreamEnv = "ERPLAB_UPSTREAM"

// addDSNFileFlag registers --NAME-file beside a command's --NAME DSN flag
// (name "dsn" or "upstream"), read into p.
func addDSNFileFlag(fl *pflag.FlagSet, p *string, name string) {
	fl.StringVar(p, name+"-file", "", "read --"+name+" from this file (mode 0600 or stricter): keeps a password out of ps")
}

// guardSplitDSN makes every command at or below c that has a connection
// string flag (--dsn, --upstream) refuse, as a usage error, positional
// arguments that are libpq keyword=value pairs while the flag is given:
// the shell split an unquoted --dsn host=127.0.0.1 port=1, and cobra
// would otherwise report "unknown command" (or the command ignore them).
// It wraps the command's Args validator, run after the flags are parsed.
func guardSplitDSN(c *cobra.Command) {
	if c.Flags().Lookup("dsn") != nil || c.Flags().Lookup("upstream") != nil {
		v := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := splitDSN(cmd.Flags(), args); err != nil {
				return err
			}
			if v == nil {
				return nil // cobra's default for a subcommand: any arguments
			}
			return v(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		guardSplitDSN(sub)
	}
}

// isURL says whether dsn is a libpq URI (postgres://, postgresql://),
// which quoting with keyword=value pairs would not make valid.
func isURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgresql://") || strings.HasPrefix(dsn, "postgres://")
}

// splitDSN is the usage error of positional args holding keyword=value
// pairs (conninfo.IsParam) beside a keyword=value --dsn or --upstream
// given in fl (not a URL),
// showing the quoted flag (passwords hidden): "--dsn takes one argument:
// quote it: --dsn 'host=127.0.0.1 port=1'"; nil otherwise. k8s render
// calls it on the run flags after its '--'.
func splitDSN(fl *pflag.FlagSet, args []string) error {
	var params []string
	for _, a := range args {
		if conninfo.IsParam(a) {
			params = append(params, a)
		}
	}
	if len(params) == 0 {
		return nil
	}
	for _, name := range []string{"dsn", "upstream"} {
		f := fl.Lookup(name)
		if f == nil || !f.Changed || isURL(f.Value.String()) {
			continue // a URL takes its parameters after '?', not quoted beside it
		}
		whole := conninfo.Redact(strings.Join(append([]string{f.Value.String()}, params...), " "))
		return withCode(exitUsage, fmt.Errorf("--%s takes one argument: quote it: --%s '%s'", name, name, strings.ReplaceAll(whole, "'", `'\''`)))
	}
	return nil
}

// resolveDSN is where a command with --dsn/--dsn-file connects: the
// flag, the file, else libpq's PG* variables (see conninfo.Source). A
// password in --dsn gets a one-line warning on the command's stderr.
func resolveDSN(cmd *cobra.Command, flag, file string) (string, bool, error) {
	return resolveSource(cmd, conninfo.Source{Flag: "--dsn", FlagValue: flag, FileFlag: "--dsn-file", File: file})
}

// resolveUpstream is resolveDSN for the proxy's --upstream/--upstream-file,
// with ERPLAB_UPSTREAM before the PG* variables.
func resolveUpstream(cmd *cobra.Command, flag, file string) (string, bool, error) {
	return resolveSource(cmd, conninfo.Source{Flag: "--upstream", FlagValue: flag, FileFlag: "--upstream-file", File: file, EnvVar: upstreamEnv})
}

func resolveSource(cmd *cobra.Command, src conninfo.Source) (string, bool, error) {
	dsn, given, warning, err := src.Resolve()
	if err != nil {
		return "", false, withCode(exitUsage, err)
	}
	// A connection string libpq's rules refuse (port=abc, an unknown
	// key) is a usage error, found before anything starts.
	if dsn != "" {
		var pce *pgconn.ParseConfigError
		if _, err := pgconn.ParseConfig(dsn); errors.As(err, &pce) {
			return "", false, withCode(exitUsage, errors.New(conninfo.DescribeFlag(err, src.Flag)))
		}
	}
	if warning != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), warning)
	}
	if given && src.FlagValue == "" && src.File == "" && (src.EnvVar == "" || os.Getenv(src.EnvVar) == "") {
		// A PGPASSWORD or PGUSER exported for something else would
		// otherwise send erplab to a server nobody named, silently.
		fmt.Fprintf(cmd.ErrOrStderr(), "no %s: connecting to the server the environment names (%s set)\n",
			src.Flag, strings.Join(conninfo.EnvVarsSet(), ", "))
	}
	return dsn, given, nil
}

// checkListenAddr validates a HOST:PORT flag value such as --metrics-addr
// ("" is off): a port number 0..65535 after the last colon, the host
// possibly empty or bracketed. The error names the flag (a usage error).
func checkListenAddr(flag, v string) error {
	if v == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(v)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = fmt.Errorf("port %q is not a number 0..65535", port)
		}
	}
	if err != nil {
		example := "127.0.0.1:9187" // a metrics address
		if flag == "--listen" {
			example = "127.0.0.1:6433"
		}
		return withCode(exitUsage, fmt.Errorf("%s %q: want HOST:PORT, e.g. %s: %w", flag, v, example, err))
	}
	return nil
}

// listenCause is the reason a listen failed without the address the
// caller already names: a *net.OpError's own error ("bind: address
// already in use"), else err.
func listenCause(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}
