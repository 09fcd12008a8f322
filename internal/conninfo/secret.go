package conninfo

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// PasswordEnv is the libpq (and pgx) variable that carries a password to a
// child process instead of its command line.
const PasswordEnv = "PGPASSWORD"

// errMalformed is returned by Split for a string it cannot take apart
// without risking a password on a command line. It never quotes the string.
var errMalformed = errors.New("malformed connection string (an unterminated quote, text glued to a quoted value or a word without '=')")

// Split takes the password out of dsn for a child process: argv is dsn
// without any password (fit for a command line, where ps shows it to every
// user of the host), env holds what was taken out as environment entries
// ("PGPASSWORD=<password>"), to append to the child's environment. Both
// pgbench/psql (libpq) and erplab (pgx) read PGPASSWORD.
//
//	host=h password='a b' user=u        -> "host=h  user=u", ["PGPASSWORD=a b"]
//	postgres://u:p%40ss@h/db            -> "postgres://u@h/db", ["PGPASSWORD=p@ss"]
//	postgres://u@h/db?password=x&a=b    -> "postgres://u@h/db?a=b", ["PGPASSWORD=x"]
//	host=h user=u                       -> "host=h user=u", nil
//
// Everything else of dsn is kept byte for byte. A key=value value is
// unquoted as libpq does (single quotes, backslash escapes); a URI's
// password (userinfo or query parameter) is percent-decoded as libpq and
// pgx do ('+' stays '+'); when several are given the last wins, as in
// libpq. An empty password (password=) is carried too: it
// overrides PGPASSWORD in libpq. With no password in dsn, env is nil and a
// child finds the password where the parent did (PGPASSWORD, PGPASSFILE,
// ~/.pgpass). The error (a malformed string) never contains dsn.
func Split(dsn string) (argv string, env []string, err error) {
	var pw string
	var found bool
	if i := uriSchemeEnd(dsn); i >= 0 {
		rest, p, ok, err := splitURI(dsn[i:])
		if err != nil {
			return "", nil, err
		}
		argv, pw, found = dsn[:i]+rest, p, ok
	} else {
		var err error
		if argv, pw, found, err = splitKV(dsn); err != nil {
			return "", nil, err
		}
	}
	if Redact(argv) != argv {
		// Something Redact would hide is left (a password whose '@', '/'
		// or '?' is not percent-encoded): refuse rather than leak it.
		return "", nil, errURIPassword
	}
	if found {
		env = []string{PasswordEnv + "=" + pw}
	}
	return argv, env, nil
}

// errURIPassword is Split's error for a URI whose password it cannot
// isolate.
var errURIPassword = errors.New("malformed connection URI: percent-encode the password's '@', '/', '?' and '%' (%40, %2F, %3F, %25)")

// HasPassword reports whether dsn holds a password (a password key, or a
// URI's user:password@), empty or not. A malformed dsn counts as holding
// one when Redact would mask something in it.
func HasPassword(dsn string) bool {
	_, env, err := Split(dsn)
	if err != nil {
		_, secrets := redact(dsn)
		return len(secrets) > 0
	}
	return env != nil
}

// ArgvWarning is the one-line warning for a password given on the command
// line in flag (e.g. "--dsn"), or "" when dsn holds none or an empty one. alt names the
// flag that reads a file ("--dsn-file") and, if not "", an environment
// variable that may hold the whole DSN. The line never contains the
// password, e.g.
//
//	warning: the password in --dsn is visible to every user of this host (ps, /proc); pass it in PGPASSWORD or ~/.pgpass (PGPASSFILE), or the whole DSN in a 0600 file with --dsn-file
func ArgvWarning(flag, dsn, fileFlag, envVar string) string {
	if !HasPassword(dsn) {
		return ""
	}
	if _, env, err := Split(dsn); err == nil && len(env) == 1 && env[0] == PasswordEnv+"=" {
		return "" // an empty password (password=''): nothing to see
	}
	whole := "a 0600 file with " + fileFlag
	if envVar != "" {
		whole = envVar + " or " + whole
	}
	return fmt.Sprintf("warning: the password in %s is visible to every user of this host (ps, /proc); pass it in %s or ~/.pgpass (PGPASSFILE), or the whole DSN in %s",
		flag, PasswordEnv, whole)
}

// ReadFile reads a DSN from a file that only its owner may read or write
// (mode 0600 or stricter, as libpq demands of ~/.pgpass): the content with
// surrounding white space removed. Errors: the file is missing, not a
// regular file, group- or world-accessible ("DSN file F has group or world
// access (mode 0644); chmod 600 F"), or empty.
func ReadFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("DSN file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("DSN file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("DSN file %s has group or world access (mode %04o); chmod 600 %s", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("DSN file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("DSN file %s is empty", path)
	}
	return s, nil
}

// Source names where a command may find its DSN, in order of precedence:
// the flag's value, the file named by the file flag, the environment
// variable EnvVar (if not ""), then libpq's PG* variables (FromEnvOrFlag).
type Source struct {
	Flag, FlagValue string // e.g. "--dsn" and its value
	FileFlag, File  string // e.g. "--dsn-file" and its value
	EnvVar          string // e.g. "ERPLAB_UPSTREAM"; "" for none
}

// Resolve returns the DSN of s and whether a server was named at all (as
// FromEnvOrFlag: ("", true) means "the PG* environment"; ("", false) means
// none). warning is ArgvWarning's line for a password in the flag's value,
// or "". A DSN named by any source goes through WithPassfile, so that
// every command takes from the password file what libpq would. Errors:
// both the flag and the file flag given, or the file refused by ReadFile.
func (s Source) Resolve() (dsn string, given bool, warning string, err error) {
	dsn, given, warning, err = s.resolve()
	if err == nil && given {
		dsn = WithPassfile(dsn)
	}
	return dsn, given, warning, err
}

func (s Source) resolve() (dsn string, given bool, warning string, err error) {
	switch {
	case s.FlagValue != "" && s.File != "":
		return "", false, "", fmt.Errorf("%s and %s both name a server: give one", s.Flag, s.FileFlag)
	case s.FlagValue != "":
		return s.FlagValue, true, ArgvWarning(s.Flag, s.FlagValue, s.FileFlag, s.EnvVar), nil
	case s.File != "":
		d, err := ReadFile(s.File)
		if err != nil {
			return "", false, "", fmt.Errorf("%s: %w", s.FileFlag, err)
		}
		return d, true, "", nil
	case s.EnvVar != "" && os.Getenv(s.EnvVar) != "":
		return os.Getenv(s.EnvVar), true, "", nil
	}
	d, given := FromEnvOrFlag("")
	return d, given, "", nil
}

// QuoteValue quotes a libpq key=value value when it needs it
// (libpq-connect.html, "Keyword/Value Connection Strings": single quotes,
// \' and \\ escaped): "a b" -> 'a b', "" -> ”, "x" -> x.
func QuoteValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\v\f'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// splitKV removes every password pair of a key=value string, returning
// the rest, the last password (unquoted) and whether there was one.
func splitKV(s string) (rest, pw string, found bool, err error) {
	var b strings.Builder
	prev := 0
	for _, tok := range kvTokens(s) {
		if !tok.pair || tok.bad {
			return "", "", false, errMalformed
		}
		if !strings.EqualFold(tok.key, "password") {
			continue
		}
		b.WriteString(s[prev:tok.start])
		prev = tok.end
		pw, found = unquoteKV(s[tok.valStart:tok.end]), true
	}
	b.WriteString(s[prev:])
	return b.String(), pw, found, nil
}

// unquoteKV is the value of a well-formed raw key=value value: quotes
// removed and backslash escapes resolved.
func unquoteKV(raw string) string {
	if strings.HasPrefix(raw, "'") {
		raw = raw[1 : len(raw)-1]
	}
	return unescapeKV(raw)
}

// kvToken is one item of a keyword/value string: s[start:valStart] is
// "key =" with its spaces and s[valStart:end] the raw value (quotes and
// escapes kept); for a word without '=' (pair false) s[start:end] is the
// word. bad marks a value libpq would refuse: an unterminated quote or
// text glued to the closing quote.
type kvToken struct {
	start, valStart, end int
	key                  string
	pair, bad            bool
}

// kvTokens scans a keyword/value string as libpq's conninfo_parse does:
// keyword, optional spaces, '=', optional spaces, then a value that is
// either single-quoted (backslash escapes, ends at the closing quote) or
// bare (backslash escapes, ends at whitespace). Words without '=' are
// returned as such. It works on any input.
func kvTokens(s string) []kvToken {
	var toks []kvToken
	i := 0
	for i < len(s) {
		if isSpace(s[i]) {
			i++
			continue
		}
		// Keyword: up to '=' or whitespace.
		k := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		// Optional spaces, then '='.
		j := i
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		if j >= len(s) || s[j] != '=' {
			toks = append(toks, kvToken{start: k, valStart: i, end: i, key: s[k:i]})
			continue
		}
		j++
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		tok := kvToken{start: k, valStart: j, key: s[k:i], pair: true}
		if j < len(s) && s[j] == '\'' {
			j++
			for j < len(s) && s[j] != '\'' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				tok.bad = true // unterminated: runs to the end
			} else {
				j++ // the closing quote
			}
			// Text glued to the closing quote (password='a'b) goes with
			// the value.
			for j < len(s) && !isSpace(s[j]) {
				j++
				tok.bad = true
			}
		} else {
			for j < len(s) && !isSpace(s[j]) {
				if s[j] == '\\' {
					j++
				}
				j++
			}
		}
		tok.end = min(j, len(s))
		if tok.end < j {
			tok.bad = true // a trailing backslash
		}
		toks = append(toks, tok)
		i = tok.end
	}
	return toks
}

// splitURI removes the passwords of p, a URI without its "scheme://": the
// userinfo's and every password query parameter.
func splitURI(p string) (rest, pw string, found bool, err error) {
	var b strings.Builder
	authEnd := strings.IndexAny(p, "/?")
	if authEnd < 0 {
		authEnd = len(p)
	}
	// userinfo "user[:password]" ends at the last '@' before the path or
	// query (as net/url, which pgx uses, reads it).
	if at := strings.LastIndexByte(p[:authEnd], '@'); at >= 0 {
		user, raw, hasPW := strings.Cut(p[:at], ":")
		b.WriteString(user + "@")
		if hasPW {
			if pw, err = url.PathUnescape(raw); err != nil {
				return "", "", false, errors.New("malformed connection URI: bad percent-encoding in the password")
			}
			found = true
		}
		p = p[at+1:]
	}
	path, query, hasQuery := strings.Cut(p, "?")
	b.WriteString(path)
	if !hasQuery {
		return b.String(), pw, found, nil
	}
	var kept []string
	for _, pair := range strings.Split(query, "&") {
		key, value, _ := strings.Cut(pair, "=")
		if dk, err := url.PathUnescape(key); err == nil && strings.EqualFold(dk, "password") {
			if pw, err = url.PathUnescape(value); err != nil {
				return "", "", false, errors.New("malformed connection URI: bad percent-encoding in the password parameter")
			}
			found = true
			continue
		}
		kept = append(kept, pair)
	}
	if len(kept) > 0 {
		b.WriteString("?" + strings.Join(kept, "&"))
	}
	return b.String(), pw, found, nil
}
