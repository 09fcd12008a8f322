// Package conninfo handles PostgreSQL connection strings (DSNs) for erplab's
// command line: hiding passwords before anything is printed (Redact), deciding
// whether and where the user named a server (FromEnvOrFlag, Source: a flag, a
// 0600 DSN file, an environment variable, libpq's PG* variables), keeping
// passwords off every command line (Split moves a DSN's password into the
// environment of a child process, ArgvWarning warns about one given in argv)
// and turning connection errors into one actionable line (Describe).
//
// Where pgx and libpq differ, libpq wins, since erplab stands in for libpq
// programs: WithDBName expands a database name that is itself a connection
// string (PQconnectdbParams's expand_dbname, used by erplab pgbench), and
// WithPassfile, applied to every DSN Source.Resolve returns, takes from the
// password file what libpq would (the socket directory as host field for
// a Unix socket, "localhost" only for DefaultSocketDir).
//
// Both DSN forms of libpq are understood (libpq-connect.html, section
// "Connection Strings"): keyword/value ("host=h password='a b'") and URI
// ("postgres://user:password@host:port/db?password=..."). The masking never
// depends on the DSN being valid.
package conninfo

import (
	"net/url"
	"strings"
)

// Mask replaces every password Redact finds.
const Mask = "xxxxx"

// isSecretKey reports whether a connection parameter's value is masked:
// password, and sslpassword (the client key's passphrase), in any case,
// and any key ending so (a short option glued to it: -dpassword=x).
func isSecretKey(key string) bool {
	return strings.HasSuffix(strings.ToLower(strings.TrimSpace(key)), "password")
}

// Redact returns dsn with passwords replaced by Mask:
//
//	postgres://u:secret@h/db          -> postgres://u:xxxxx@h/db
//	postgres://u@h/db?password=secret -> postgres://u@h/db?password=xxxxx
//	host=h password='a b' user=u      -> host=h password=xxxxx user=u
//
// It works on any input, valid or not, and prefers hiding too much to
// leaking: an unterminated quoted password hides the rest of the string, an
// unencoded '@' or '/' in a URI password hides everything up to the host, a
// non-numeric URI port (a misplaced password?) is hidden. Keys are compared
// case-insensitively. Everything else is returned unchanged.
func Redact(dsn string) string {
	out, _ := redact(dsn)
	return out
}

// redact returns Redact(dsn) and the raw text of every masked part.
func redact(dsn string) (string, []string) {
	var secrets []string
	hide := func(s string) string {
		if s != "" {
			secrets = append(secrets, s)
		}
		return Mask
	}
	if i := uriSchemeEnd(dsn); i >= 0 {
		return dsn[:i] + redactURI(dsn[i:], hide), secrets
	}
	return redactKV(dsn, hide), secrets
}

// uriSchemeEnd returns the index just after "://" when dsn (after leading
// space) starts with a URI scheme such as postgres:// or postgresql://, else -1.
func uriSchemeEnd(dsn string) int {
	i := strings.Index(dsn, "://")
	if i <= 0 {
		return -1
	}
	scheme := strings.TrimLeft(dsn[:i], " \t\n\r\v\f")
	if scheme == "" {
		return -1
	}
	for j, r := range scheme {
		letter := (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !letter && (j == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return -1
		}
	}
	return i + len("://")
}

// redactURI masks the passwords in p, a URI without its "scheme://"; hide
// records a secret and returns its replacement.
func redactURI(p string, hide func(string) string) string {
	var b strings.Builder
	slash := strings.IndexByte(p, '/')
	if slash < 0 {
		slash = len(p)
	}
	if at := strings.LastIndexByte(p[:slash], '@'); at >= 0 {
		// userinfo "user[:password]" ends at the last '@' before the path:
		// libpq stops at the first one, but an unencoded '@' in a password
		// must not reveal the rest of it.
		user, pw, hasPW := strings.Cut(p[:at], ":")
		b.WriteString(user)
		if hasPW {
			b.WriteString(":" + hide(pw))
		}
		b.WriteByte('@')
		p = p[at+1:]
	} else if colon, at := strayUserinfo(p); at >= 0 {
		// "user:pass/word@host" or "user:pa?ss@host": a '/' or '?' in the
		// password made the '@' look like part of the path or query.
		b.WriteString(p[:colon+1] + hide(p[colon+1:at]) + "@")
		p = p[at+1:]
	}

	// Host list, up to the path or query: hide non-numeric ports.
	end := strings.IndexAny(p, "/?")
	if end < 0 {
		end = len(p)
	}
	for i, hostPort := range strings.Split(p[:end], ",") {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(redactHostPort(hostPort, hide))
	}
	p = p[end:]

	path, query, hasQuery := strings.Cut(p, "?")
	b.WriteString(path)
	if !hasQuery {
		return b.String()
	}
	b.WriteByte('?')
	for i, pair := range strings.Split(query, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		key, value, hasValue := strings.Cut(pair, "=")
		dk, err := url.QueryUnescape(key)
		if err != nil {
			dk = key
		}
		if hasValue && isSecretKey(dk) {
			b.WriteString(key + "=" + hide(value))
		} else {
			b.WriteString(pair)
		}
	}
	return b.String()
}

// strayUserinfo finds a userinfo whose '@' comes after a '/' or '?' inside
// the password. It returns the index of the user/password ':' and of the '@'
// ending the password, or -1, -1. A "host:port/db?k=a@b" URI, with a numeric
// port and the '@' only in the query, is not one.
func strayUserinfo(p string) (colon, at int) {
	firstAt := strings.IndexByte(p, '@')
	if firstAt < 0 {
		return -1, -1
	}
	colon = strings.IndexByte(p[:firstAt], ':')
	if colon < 0 || strings.HasPrefix(p, "[") {
		return -1, -1
	}
	if d := strings.IndexAny(p, "/?"); d >= 0 && d < colon {
		return -1, -1 // the ':' is in the path or query, not in userinfo
	}
	portEnd := strings.IndexAny(p[colon+1:], "/?,")
	if portEnd < 0 {
		portEnd = len(p) - colon - 1
	}
	port := p[colon+1 : colon+1+portEnd]
	q := strings.IndexByte(p, '?')
	if numeric(port) && q >= 0 && q < firstAt {
		return -1, -1 // '@' only in the query of a host:port URI
	}
	// The password ends at the last '@' before a '?' that follows the
	// first '@' (the real query), or at the last '@' at all.
	limit := len(p)
	if q2 := strings.IndexByte(p[firstAt:], '?'); q2 >= 0 {
		limit = firstAt + q2
	}
	return colon, strings.LastIndexByte(p[:limit], '@')
}

// redactHostPort masks a non-numeric port in "host:port" or "[v6]:port".
func redactHostPort(hp string, hide func(string) string) string {
	hostEnd := 0
	if strings.HasPrefix(hp, "[") {
		if i := strings.IndexByte(hp, ']'); i >= 0 {
			hostEnd = i + 1
		}
	}
	colon := strings.IndexByte(hp[hostEnd:], ':')
	if colon < 0 {
		return hp
	}
	colon += hostEnd
	if numeric(strings.TrimSpace(hp[colon+1:])) {
		return hp
	}
	return hp[:colon+1] + hide(hp[colon+1:])
}

func numeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isSpace is libpq's whitespace in keyword/value strings (isspace in C).
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// redactKV masks password values in a keyword/value string scanned by
// kvTokens (libpq's conninfo_parse rules). Text that does not fit is kept
// as is, except that an unterminated password value masks the rest of the
// string, and stray words after a password value (password=two words) are
// masked as its likely continuation. hide records a secret and returns its
// replacement.
func redactKV(s string, hide func(string) string) string {
	var b strings.Builder
	afterSecret := false
	prev := 0
	for _, tok := range kvTokens(s) {
		b.WriteString(s[prev:tok.start]) // whitespace between items
		prev = tok.end
		if !tok.pair {
			// Not "key=": libpq would reject the string. Keep the word,
			// unless it may be the rest of an unquoted password.
			if afterSecret {
				b.WriteString(hide(s[tok.start:tok.end]))
			} else {
				b.WriteString(s[tok.start:tok.end])
			}
			continue
		}
		b.WriteString(s[tok.start:tok.valStart])
		afterSecret = isSecretKey(tok.key)
		if afterSecret {
			b.WriteString(hide(s[tok.valStart:tok.end]))
		} else {
			b.WriteString(s[tok.valStart:tok.end])
		}
	}
	b.WriteString(s[prev:])
	return b.String()
}

// RedactArgs returns a copy of a command line with every password hidden
// as Redact does: in any argument that is a DSN (the value after a
// separate --dsn, a positional connection string such as pgbench's
// DBNAME) and in a DSN glued to an option: --dsn=DSN, --upstream=DSN,
// -xDSN, -abxDSN (getopt's clusters). Results documents and reports keep
// command lines only through it.
func RedactArgs(args []string) []string {
	if args == nil {
		return nil
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = redactArg(a)
	}
	return out
}

// redactArg is RedactArgs for one argument.
func redactArg(a string) string {
	if !strings.HasPrefix(a, "-") {
		return Redact(a)
	}
	// A libpq URI glued to its option (-xpostgres://u:pw@h, --dsn=...).
	for _, scheme := range []string{"postgresql://", "postgres://"} {
		if i := strings.Index(a, scheme); i > 0 {
			return a[:i] + Redact(a[i:])
		}
	}
	if opt, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
		return opt + "=" + Redact(v)
	}
	// -xhost=h password=x, -xpassword=x: the option letters glue to the
	// first key, which isSecretKey reads by its ending.
	return Redact(a)
}
