package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"

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
