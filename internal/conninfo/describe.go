package conninfo

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// connEnvVars are the libpq environment variables that choose a server or
// the identity used on it (libpq-envars.html). Variables that only tune a
// connection (PGAPPNAME, PGCONNECT_TIMEOUT, PGOPTIONS, PGTZ, PGPASSFILE,
// PGSERVICEFILE...) do not count as naming a server.
func connEnvVars() []string {
	return []string{
		"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD",
		"PGSERVICE", "PGSSLMODE", "PGREQUIRESSL", "PGSSLCERT", "PGSSLKEY",
		"PGSSLROOTCERT", "PGTARGETSESSIONATTRS",
	}
}

// FromEnvOrFlag decides where erplab connects. A non-empty --dsn flag wins:
// it returns (flag, true). Otherwise, if any libpq connection variable
// (PGHOST, PGHOSTADDR, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSERVICE,
// PGSSLMODE, PGREQUIRESSL, PGSSLCERT, PGSSLKEY, PGSSLROOTCERT,
// PGTARGETSESSIONATTRS) is set and non-empty it returns ("", true): an empty
// DSN makes pgx read the environment. Otherwise it returns ("", false): the
// caller starts an embedded cluster (internal/pgcluster).
func FromEnvOrFlag(flag string) (dsn string, given bool) {
	if flag != "" {
		return flag, true
	}
	return "", len(EnvVarsSet()) > 0
}

// EnvVarsSet returns the names of the libpq connection variables counted by
// FromEnvOrFlag that are set and non-empty, in a fixed order, e.g.
// ["PGHOST", "PGUSER"]; useful to say where a connection came from.
func EnvVarsSet() []string {
	var set []string
	for _, name := range connEnvVars() {
		if os.Getenv(name) != "" {
			set = append(set, name)
		}
	}
	return set
}

// SQLSTATE codes Describe explains (PostgreSQL docs, errcodes-appendix.html).
const (
	codeInvalidAuthorization = "28000" // e.g. role does not exist, no pg_hba.conf entry
	codeInvalidPassword      = "28P01"
	codeInvalidCatalogName   = "3D000" // database does not exist
	codeInsufficientPriv     = "42501" // no CONNECT privilege
	codeTooManyConnections   = "53300"
	codeCannotConnectNow     = "57P03" // starting up, shutting down, in recovery
)

// Describe turns an error from pgx/pgconn Connect or ParseConfig into one
// line saying what is wrong and how to fix it, e.g.
//
//	cannot reach server at 127.0.0.1:5432: connection refused; is PostgreSQL running there? check host and port in --dsn
//	database "x" does not exist; create it or pass another dbname in --dsn
//	invalid --dsn: invalid port
//
// The line never contains the password of the connection string or config
// involved (it is masked even where the underlying error quotes it). A nil
// error gives "".
func Describe(err error) string { return DescribeFlag(err, "--dsn") }

// DescribeFlag is Describe for a command whose connection string comes
// from flag (e.g. "--upstream"): the line names flag where Describe says
// --dsn.
func DescribeFlag(err error, flag string) string {
	if err == nil {
		return ""
	}
	var secrets []string
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		_, secrets = redact(pce.ConnString)
		return scrub("invalid "+flag+": "+parseDetail(pce), secrets)
	}
	var ce *pgconn.ConnectError
	where := ""
	if errors.As(err, &ce) && ce.Config != nil {
		secrets = append(secrets, ce.Config.Password)
		where = serverAddress(ce.Config)
	}
	return scrub(describeCause(err, where, flag), secrets)
}

// describeCause explains err; where is the server address, "" if unknown.
func describeCause(err error, where, flag string) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return describePgError(pgErr, where, flag)
	}

	var opErr *net.OpError
	if errors.As(err, &opErr) && where == "" && opErr.Addr != nil {
		where = opErr.Addr.String()
	}
	at := ""
	if where != "" {
		at = " at " + where
	}
	hint := "; is PostgreSQL running there? check host and port in " + flag
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostnameErr x509.HostnameError
	switch {
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("cannot resolve host %q: %s; check host in %s", dnsErr.Name, dnsErr.Err, flag)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "cannot reach server" + at + ": connection refused" + hint
	case errors.Is(err, syscall.ENOENT) && opErr != nil:
		return "cannot reach server" + at + ": no such socket" + hint
	case errors.Is(err, syscall.EACCES) && opErr != nil:
		return "cannot reach server" + at + ": permission denied on the socket; run as a user that may use it or pass " + flag
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "cannot reach server" + at + ": no route to host; check host in " + flag
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT), isTimeout(err):
		return "cannot reach server" + at + ": timed out; check host/port in " + flag + " and firewalls (connect_timeout sets the limit)"
	case errors.Is(err, context.Canceled):
		return "connection attempt" + at + " cancelled"
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostnameErr):
		return "TLS certificate of the server" + at + " not accepted: " + innermost(err) + "; set sslrootcert or sslmode in " + flag
	case strings.Contains(err.Error(), "server refused TLS connection"):
		return "server" + at + " does not accept TLS (SSL); use sslmode=disable or sslmode=prefer in " + flag
	case opErr != nil:
		return "cannot reach server" + at + ": " + innermost(err) + hint
	}
	return "cannot connect" + at + ": " + oneLine(err.Error())
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// describePgError explains an error the server sent during connection.
func describePgError(e *pgconn.PgError, where, flag string) string {
	msg := oneLine(e.Message)
	switch e.Code {
	case codeInvalidCatalogName:
		// Message: database "x" does not exist (src/backend/utils/init/postinit.c).
		return msg + "; create it or pass another dbname in " + flag
	case codeInvalidAuthorization, codeInvalidPassword:
		return "authentication failed: " + msg + "; check user and password in " + flag + " (or PGUSER/PGPASSWORD, ~/.pgpass) and the server's pg_hba.conf"
	case codeInsufficientPriv:
		return "not allowed to connect: " + msg + "; GRANT CONNECT on the database or pass another user in " + flag
	case codeTooManyConnections:
		return "server refused the connection: " + msg + "; lower the number of connections (virtual users, pool size) or raise max_connections"
	case codeCannotConnectNow:
		return "server not accepting connections now: " + msg + "; wait until it has started or pass another server in " + flag
	}
	at := ""
	if where != "" {
		at = " at " + where
	}
	return fmt.Sprintf("server%s refused the connection: %s (SQLSTATE %s)", at, msg, e.Code)
}

// serverAddress is "host:port" or the Unix socket path of a config.
func serverAddress(c *pgconn.Config) string {
	if c.Host == "" {
		return ""
	}
	if strings.HasPrefix(c.Host, "/") {
		_, addr := pgconn.NetworkAddress(c.Host, c.Port)
		return addr
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
}

// parseDetail is ParseConfigError's message without the "cannot parse
// `<dsn>`: " prefix.
func parseDetail(e *pgconn.ParseConfigError) string {
	text := e.Error()
	if rest, ok := strings.CutPrefix(text, "cannot parse `"); ok {
		if i := strings.LastIndex(rest, "`: "); i >= 0 {
			return oneLine(rest[i+len("`: "):])
		}
	}
	return oneLine(text)
}

// innermost is the message of the deepest wrapped error, e.g. "connect:
// connection reset by peer" -> "connection reset by peer".
func innermost(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return oneLine(err.Error())
		}
		err = next
	}
}

// oneLine joins a multi-line message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// scrub masks in msg every secret, and every piece of it of 3 or more bytes
// (split at spaces and quotes, unquoted), since an error may quote a
// password only in part or after unescaping.
func scrub(msg string, secrets []string) string {
	var pieces []string
	for _, s := range secrets {
		pieces = append(pieces, s, strings.Trim(s, "'"))
		pieces = append(pieces, unescapeKV(strings.Trim(s, "'")))
		if u, err := url.PathUnescape(s); err == nil {
			pieces = append(pieces, u)
		}
		pieces = append(pieces, strings.FieldsFunc(s, func(r rune) bool {
			return r == ' ' || r == '\'' || r == '"' || r == '\t' || r == '\n'
		})...)
	}
	// Longest first, so a piece does not break up a longer secret.
	slices.SortFunc(pieces, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	for _, p := range slices.Compact(pieces) {
		if len(p) >= 3 {
			msg = strings.ReplaceAll(msg, p, Mask)
		}
	}
	return msg
}

// unescapeKV removes keyword/value backslash escapes (\' and \\).
func unescapeKV(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// OpenPool parses dsn, opens a pgx pool of at most size connections and
// checks that the server answers (15 s at most), returning errors as one
// clear line without passwords (see Describe).
func OpenPool(ctx context.Context, dsn string, size int, opts ...PoolOption) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New(Describe(err))
	}
	for _, o := range opts {
		o(cfg)
	}
	cfg.MaxConns = int32(max(size, 1))
	cfg.MaxConnIdleTime = time.Hour
	// Name erplab's sessions in pg_stat_activity unless the DSN does.
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "erplab"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, errors.New(Describe(err))
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, errors.New(Describe(err))
	}
	return pool, nil
}

// IsLocal reports whether a connection's remote address is on this
// machine: a Unix socket or a loopback IP (so host figures from /proc
// describe the server's host).
func IsLocal(a net.Addr) bool {
	switch a := a.(type) {
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	}
	return false
}

// Connect opens one connection to dsn within 15 s, naming the session
// appName in pg_stat_activity unless the DSN sets application_name, with
// params as extra run-time parameters (e.g. default_transaction_read_only).
// Errors are one line without passwords (see Describe).
func Connect(ctx context.Context, dsn, appName string, params map[string]string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New(Describe(err))
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = appName
	}
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, errors.New(Describe(err))
	}
	return conn, nil
}

// PoolOption adjusts a pool's configuration in OpenPool.
type PoolOption func(*pgxpool.Config)
