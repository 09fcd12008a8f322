package conninfo

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgpassfile"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultSocketDir is libpq's DEFAULT_PGSOCKET_DIR as Debian and Ubuntu
// build it (pgbench and psql of the postgresql-NN packages): a Unix-socket
// connection to this directory looks up "localhost" in the password file.
const DefaultSocketDir = "/var/run/postgresql"

// IsConnString reports whether libpq expands dbname into connection
// parameters (PQconnectdbParams with expand_dbname=1,
// recognized_connection_string in fe-connect.c): it contains '=' or starts
// with "postgresql://" or "postgres://".
func IsConnString(dbname string) bool {
	return strings.Contains(dbname, "=") ||
		strings.HasPrefix(dbname, "postgresql://") || strings.HasPrefix(dbname, "postgres://")
}

// Param is one keyword/value pair of WithDBName, e.g. {"host", "/tmp"}.
type Param struct{ Key, Value string }

// WithDBName returns the connection string libpq builds from params (in
// order, pairs with an empty value skipped) followed by dbname, as
// PQconnectdbParams(keywords, values, expand_dbname=1) does when dbname is
// the last keyword (pgbench's doConnect: host, port, user, password,
// dbname): a dbname that IsConnString is expanded and every parameter it
// sets overrides the same parameter of params; any other dbname is the
// database name. What neither sets comes, when pgx parses the result,
// from the service file, the PG* variables and the defaults, in libpq's
// order. Examples:
//
//	[{host /a} {user u}], "dbname=b host=/c"          -> "host='/a' user='u' dbname=b host=/c"
//	[{host /a} {user u}], "postgresql:///b?host=/c"   -> "postgresql:///b?host=/c&user=u"
//	[{host /a}], "bench"                              -> "host='/a' dbname='bench'"
//
// A URI that net/url cannot parse is returned as is, without params (pgx
// then reports it as an invalid connection string).
func WithDBName(params []Param, dbname string) string {
	if dbname != "" && !IsConnString(dbname) {
		params = append(params[:len(params):len(params)], Param{"dbname", dbname})
		dbname = ""
	}
	if uriSchemeEnd(dbname) < 0 {
		var parts []string
		for _, p := range params {
			if p.Value != "" {
				parts = append(parts, p.Key+"="+QuoteValue(p.Value))
			}
		}
		if strings.TrimSpace(dbname) != "" {
			parts = append(parts, dbname)
		}
		return strings.Join(parts, " ")
	}
	set, ok := uriKeys(dbname)
	if !ok {
		return dbname
	}
	var add []string
	for _, p := range params {
		if p.Value != "" && !set[p.Key] {
			add = append(add, queryEscape(p.Key)+"="+queryEscape(p.Value))
			set[p.Key] = true
		}
	}
	if len(add) == 0 {
		return dbname
	}
	sep := "?"
	if strings.Contains(dbname, "?") {
		sep = "&"
		if strings.HasSuffix(dbname, "?") || strings.HasSuffix(dbname, "&") {
			sep = ""
		}
	}
	return dbname + sep + strings.Join(add, "&")
}

// queryEscape percent-encodes a URI query key or value so that both libpq
// (which does not read '+' as a space) and pgx decode it back.
func queryEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// uriKeys is the set of libpq keywords a postgres:// URI sets (user,
// password, host, port, dbname, and every query parameter), read as pgx
// reads the URI; false when it does not parse.
func uriKeys(uri string) (map[string]bool, bool) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, false
	}
	set := map[string]bool{}
	if u.User != nil {
		if u.User.Username() != "" {
			set["user"] = true
		}
		if _, ok := u.User.Password(); ok {
			set["password"] = true
		}
	}
	for _, hp := range strings.Split(u.Host, ",") {
		if hp == "" {
			continue
		}
		if h, p, err := net.SplitHostPort(hp); err == nil {
			set["host"] = set["host"] || h != ""
			set["port"] = set["port"] || p != ""
		} else {
			set["host"] = true
		}
	}
	if strings.TrimLeft(u.Path, "/") != "" {
		set["dbname"] = true
	}
	for k := range u.Query() {
		set[k] = true
	}
	return set, true
}

// noPassfile is a password file that cannot exist (a path under a device
// file): pgx and libpq then silently take no password from a file.
const noPassfile = "/dev/null/none"

// WithPassfile returns dsn changed so that pgx takes from the password
// file what libpq would (libpq-pgpass.html): pgx looks up "localhost" for
// every Unix-socket connection, libpq looks up the socket directory, and
// "localhost" only for DefaultSocketDir; libpq also ignores a file with
// group or world access. dsn is returned unchanged when it holds a
// password, when PGPASSWORD is set, when it does not parse (the caller
// reports that), or when both lookups agree. Otherwise the password libpq
// finds is added as a password parameter (masked by Redact, moved to
// PGPASSWORD by Split for a child process), or, when libpq finds none
// but pgx would, passfile is pointed at a file that cannot exist. The
// file is the DSN's passfile, else PGPASSFILE, else ~/.pgpass; the lookup
// uses the first host only (pgx keeps one password for all hosts) and
// the user name as database when the DSN names none, as libpq does.
func WithPassfile(dsn string) string {
	if HasPassword(dsn) || os.Getenv(PasswordEnv) != "" {
		return dsn
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return dsn
	}
	path := passfilePath(dsn)
	if path == "" {
		return dsn
	}
	pf, err := pgpassfile.ReadPassfile(path)
	if err != nil {
		return dsn
	}
	port := strconv.Itoa(int(cfg.Port))
	pgxHost := cfg.Host
	unix := strings.HasPrefix(cfg.Host, "/")
	if unix {
		pgxHost = "localhost"
	}
	pgxPW := pf.FindPassword(pgxHost, port, cfg.Database, cfg.User)
	if cfg.Password != pgxPW {
		return dsn // the password came from somewhere else (a service file)
	}
	host := cfg.Host
	if unix && filepath.Clean(host) == DefaultSocketDir {
		host = "localhost"
	}
	db := cfg.Database
	if db == "" {
		db = cfg.User
	}
	pw := ""
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o077 == 0 {
		pw = pf.FindPassword(host, port, db, cfg.User)
	}
	switch {
	case pw == pgxPW:
		return dsn
	case pw != "":
		return appendParam(dsn, "password", pw)
	default:
		return appendParam(dsn, "passfile", noPassfile)
	}
}

// passfilePath is the password file pgx reads for dsn: its passfile
// parameter, else PGPASSFILE, else ~/.pgpass; "" when there is none.
func passfilePath(dsn string) string {
	path := ""
	if uriSchemeEnd(dsn) >= 0 {
		if u, err := url.Parse(dsn); err == nil {
			if v, ok := u.Query()["passfile"]; ok {
				path = v[0]
			}
		}
	} else {
		for _, tok := range kvTokens(dsn) {
			if tok.pair && !tok.bad && tok.key == "passfile" {
				path = unquoteKV(dsn[tok.valStart:tok.end])
			}
		}
	}
	if path == "" {
		path = os.Getenv("PGPASSFILE")
	}
	if path == "" {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, ".pgpass")
		}
	}
	return path
}

// appendParam adds key=value to dsn, a keyword/value string or a URI,
// overriding any earlier value of key.
func appendParam(dsn, key, value string) string {
	if uriSchemeEnd(dsn) < 0 {
		if strings.TrimSpace(dsn) == "" {
			return key + "=" + QuoteValue(value)
		}
		return dsn + " " + key + "=" + QuoteValue(value)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	// pgx takes a query key's first value: drop the earlier ones.
	var kept []string
	if u.RawQuery != "" {
		for _, pair := range strings.Split(u.RawQuery, "&") {
			k, _, _ := strings.Cut(pair, "=")
			if dk, err := url.QueryUnescape(k); err == nil && dk == key {
				continue
			}
			kept = append(kept, pair)
		}
	}
	kept = append(kept, queryEscape(key)+"="+queryEscape(value))
	base, _, _ := strings.Cut(dsn, "?")
	return base + "?" + strings.Join(kept, "&")
}

// IsKeyword reports whether key is a libpq connection parameter keyword
// (libpq-connect.html, "Parameter Key Words": PostgreSQL 15's, and those
// libpq 16 and 17 added).
func IsKeyword(key string) bool {
	switch key {
	case "host", "hostaddr", "port", "dbname", "user", "password", "passfile",
		"channel_binding", "connect_timeout", "client_encoding", "options",
		"application_name", "fallback_application_name", "keepalives",
		"keepalives_idle", "keepalives_interval", "keepalives_count",
		"tcp_user_timeout", "replication", "gssencmode", "sslmode", "requiressl",
		"sslcompression", "sslcert", "sslkey", "sslpassword", "sslrootcert",
		"sslcrl", "sslcrldir", "sslsni", "requirepeer", "ssl_min_protocol_version",
		"ssl_max_protocol_version", "krbsrvname", "gsslib", "service",
		"target_session_attrs",
		// libpq 16 and 17
		"require_auth", "sslcertmode", "load_balance_hosts", "gssdelegation", "sslnegotiation":
		return true
	}
	return false
}

// IsParam reports whether a command-line argument is one keyword=value
// pair of a connection string: its text before the first '=' is a libpq
// keyword (IsKeyword). "port=1" is; "SELECT a=1" and "x=1" are not.
func IsParam(arg string) bool {
	key, _, ok := strings.Cut(arg, "=")
	return ok && IsKeyword(key)
}
