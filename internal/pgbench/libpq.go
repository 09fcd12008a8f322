package pgbench

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/pgbench/script"
)

// ConnectMessage words a failed connection like libpq 15 (and so pgbench),
// one attempt after another (fe-connect.c: emitHostIdentityInfo,
// connectFailureMessage):
//
//	connection to server on socket "/tmp/.s.PGSQL.5432" failed: FATAL:  database "x" does not exist
//	connection to server on socket "/nonexistent/.s.PGSQL.5432" failed: No such file or directory
//		Is the server running locally and accepting connections on that socket?
//	connection to server at "db1" (10.0.0.5), port 5432 failed: Connection refused
//		Is the server running on that host and accepting TCP/IP connections?
//	could not translate host name "db2" to address: Name or service not known
//
// A host name is the first host of the connection string (libpq names
// each host of a multi-host string). Errors that are not a
// *pgconn.ConnectError are returned as they are.
func ConnectMessage(err error) string {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || ce.Config == nil {
		return err.Error()
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return where(ce.Config.Host, "", ce.Config.Port) + script.LibpqMessage(pgErr)
	}
	var msgs []string
	for _, a := range attempts(errors.Unwrap(ce)) {
		// pgx tries again without TLS (sslmode prefer) where libpq does
		// not after a failed connect: the same message once
		if m := attemptMessage(ce.Config, a); len(msgs) == 0 || msgs[len(msgs)-1] != m {
			msgs = append(msgs, m)
		}
	}
	return strings.Join(msgs, "\n")
}

// attempts are the connection attempts of a ConnectError's cause: the
// errors it joins (one per host, address and TLS mode tried), or itself.
func attempts(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, attempts(e)...)
		}
		return out
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// where is libpq's "connection to server ... failed: " for host (a socket
// directory, a name or an address), the address it resolved to ("" when
// not known or the same) and port.
func where(host, addr string, port uint16) string {
	switch {
	case strings.HasPrefix(host, "/"):
		return fmt.Sprintf("connection to server on socket \"%s/.s.PGSQL.%d\" failed: ", host, port)
	case addr != "" && addr != host:
		return fmt.Sprintf("connection to server at \"%s\" (%s), port %d failed: ", host, addr, port)
	}
	return fmt.Sprintf("connection to server at \"%s\", port %d failed: ", host, port)
}

// attemptMessage words one failed attempt on cfg's server.
func attemptMessage(cfg *pgconn.Config, err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Sprintf("could not translate host name \"%s\" to address: %s", dns.Name, gaiText(dns))
	}
	var op *net.OpError
	var errno unix.Errno
	if errors.As(err, &op) && op.Op == "dial" && errors.As(err, &errno) {
		switch a := op.Addr.(type) {
		case *net.UnixAddr:
			return fmt.Sprintf("connection to server on socket \"%s\" failed: %s\n\tIs the server running locally and accepting connections on that socket?", a.Name, script.Strerror(errno))
		case *net.TCPAddr:
			return where(cfg.Host, a.IP.String(), uint16(a.Port)) + script.Strerror(errno) + "\n\tIs the server running on that host and accepting TCP/IP connections?"
		}
	}
	// pgx's per-attempt error says "address (host): cause": keep the cause
	cause := err
	for next := errors.Unwrap(cause); next != nil && strings.Contains(cause.Error(), "): "); next = errors.Unwrap(cause) {
		cause = next
	}
	return where(cfg.Host, "", cfg.Port) + cause.Error()
}

// gaiText is getaddrinfo's gai_strerror(3) text (glibc) for a failed
// lookup.
func gaiText(e *net.DNSError) string {
	switch {
	case e.IsNotFound:
		return "Name or service not known" // EAI_NONAME
	case e.IsTemporary, e.IsTimeout:
		return "Temporary failure in name resolution" // EAI_AGAIN
	}
	return e.Err
}
