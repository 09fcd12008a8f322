package script

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// builtin is one of pgbench's builtin scripts (pgbench.c builtin_script[]).
type builtin struct {
	name, desc, text string
}

// The builtin scripts, with pgbench's exact text (naccounts = 100000,
// nbranches = 1, ntellers = 10).
var builtins = [...]builtin{
	{
		"tpcb-like",
		"<builtin: TPC-B (sort of)>",
		"\\set aid random(1, 100000 * :scale)\n" +
			"\\set bid random(1, 1 * :scale)\n" +
			"\\set tid random(1, 10 * :scale)\n" +
			"\\set delta random(-5000, 5000)\n" +
			"BEGIN;\n" +
			"UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\n" +
			"SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n" +
			"UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;\n" +
			"UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;\n" +
			"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);\n" +
			"END;\n",
	},
	{
		"simple-update",
		"<builtin: simple update>",
		"\\set aid random(1, 100000 * :scale)\n" +
			"\\set bid random(1, 1 * :scale)\n" +
			"\\set tid random(1, 10 * :scale)\n" +
			"\\set delta random(-5000, 5000)\n" +
			"BEGIN;\n" +
			"UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\n" +
			"SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n" +
			"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);\n" +
			"END;\n",
	},
	{
		"select-only",
		"<builtin: select only>",
		"\\set aid random(1, 100000 * :scale)\n" +
			"SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n",
	},
}

// BuiltinNames returns the names of pgbench's builtin scripts: tpcb-like,
// simple-update, select-only.
func BuiltinNames() []string {
	out := make([]string, len(builtins))
	for i, b := range builtins {
		out[i] = b.name
	}
	return out
}

// findBuiltin is pgbench's findBuiltin: name may be any unambiguous prefix.
func findBuiltin(name string) (*builtin, error) {
	var found *builtin
	n := 0
	for i := range builtins {
		if strings.HasPrefix(builtins[i].name, name) {
			found = &builtins[i]
			n++
		}
	}
	switch n {
	case 1:
		return found, nil
	case 0:
		return nil, fmt.Errorf("no builtin script found for name %q (available: %s)", name,
			strings.Join(BuiltinNames(), ", "))
	default:
		return nil, fmt.Errorf("ambiguous builtin name: %d builtin scripts found for prefix %q", n, name)
	}
}

// BuiltinText returns the text of the builtin script named by name (a prefix
// is enough, as with pgbench -b) and its description, e.g.
// "<builtin: select only>" — what pgbench --show-script prints.
func BuiltinText(name string) (text, desc string, err error) {
	b, err := findBuiltin(name)
	if err != nil {
		return "", "", err
	}
	return b.text, b.desc, nil
}

// Builtin parses the builtin script named by spec, "name" or "name@weight"
// as for pgbench -b: any unambiguous prefix of tpcb-like, simple-update or
// select-only ("select" is select-only; "s" is ambiguous, an error). The
// script's Name is pgbench's description, e.g. "<builtin: TPC-B (sort of)>".
func Builtin(spec string) (*Script, error) {
	name, weight, err := ParseWeighted(spec)
	if err != nil {
		return nil, err
	}
	b, err := findBuiltin(name)
	if err != nil {
		return nil, err
	}
	s, err := Parse(b.desc, b.text)
	if err != nil {
		return nil, fmt.Errorf("builtin script %s: %w", b.name, err)
	}
	s.Weight = weight
	return s, nil
}

// ParseFile parses a script read from a file: spec is "path" or
// "path@weight" as for pgbench -f; read returns the file's contents (e.g.
// os.ReadFile). The script's Name is the path.
func ParseFile(spec string, read func(path string) ([]byte, error)) (*Script, error) {
	path, weight, err := ParseWeighted(spec)
	if err != nil {
		return nil, err
	}
	b, err := read(path)
	if err != nil {
		// pgbench's process_file: fopen, then reading it (a directory
		// opens and fails to read)
		verb := "open"
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Op == "read" {
			verb = "read"
		}
		return nil, fmt.Errorf("could not %s file \"%s\": %w", verb, path, &OSError{err})
	}
	s, err := Parse(path, string(b))
	if err != nil {
		return nil, err
	}
	s.Weight = weight
	return s, nil
}
