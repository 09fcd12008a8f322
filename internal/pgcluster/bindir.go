package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// EnvBinDir names the environment variable that, when set, is the only place
// FindBinDir looks for the server binaries (postgres, initdb).
const EnvBinDir = "ERPLAB_PG_BINDIR"

// debianRoot is where Debian/Ubuntu packages install one bin directory per
// major version: /usr/lib/postgresql/<major>/bin.
const debianRoot = "/usr/lib/postgresql"

// ErrNoServer is wrapped by the error FindBinDir and Start return when no
// PostgreSQL server binaries (postgres and initdb) can be found.
var ErrNoServer = errors.New("no PostgreSQL server binaries (postgres, initdb) found")

// installHint is the one-line remedy appended to ErrNoServer errors.
const installHint = "install them (Debian/Ubuntu: apt-get install postgresql) or pass --dsn to use an existing server"

// FindBinDir returns the directory holding the PostgreSQL server binaries
// postgres and initdb. It looks, in order, at:
//
//  1. $ERPLAB_PG_BINDIR (if set, it is the only place looked at);
//  2. the output of `pg_config --bindir`, if that directory has both binaries
//     (on Debian /usr/bin/pg_config may come from libpq-dev without a server);
//  3. PATH: the directory of `postgres`, then of `initdb`, symlinks resolved;
//  4. /usr/lib/postgresql/<newest numeric version>/bin.
//
// When nothing is found the error wraps ErrNoServer and its text is one line
// saying how to install the server or to pass --dsn instead.
func FindBinDir() (string, error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		if hasServer(d) {
			return d, nil
		}
		return "", fmt.Errorf("%w in $%s=%s: %s", ErrNoServer, EnvBinDir, d, installHint)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); hasServer(d) {
			return d, nil
		}
	}
	for _, name := range []string{"postgres", "initdb"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if d := filepath.Dir(p); hasServer(d) {
			return d, nil
		}
	}
	if d := newestVersionBinDir(debianRoot); d != "" {
		return d, nil
	}
	return "", fmt.Errorf("%w in $%s, pg_config --bindir, PATH or %s/*/bin: %s",
		ErrNoServer, EnvBinDir, debianRoot, installHint)
}

// hasServer reports whether dir holds executable postgres and initdb files.
func hasServer(dir string) bool {
	for _, name := range []string{"postgres", "initdb"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// newestVersionBinDir returns root/<v>/bin for the numerically newest version
// directory v (e.g. "16" over "9.6", "15" over "9") that has the server
// binaries, or "" if none has. Names that are not dot-separated numbers are
// ignored.
func newestVersionBinDir(root string) string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	type cand struct {
		ver []int
		dir string
	}
	var cands []cand
	for _, e := range entries {
		ver, ok := parseVersion(e.Name())
		if !ok {
			continue
		}
		d := filepath.Join(root, e.Name(), "bin")
		if hasServer(d) {
			cands = append(cands, cand{ver, d})
		}
	}
	if len(cands) == 0 {
		return ""
	}
	best := slices.MaxFunc(cands, func(a, b cand) int { return slices.Compare(a.ver, b.ver) })
	return best.dir
}

// parseVersion parses "15" or "9.6" into its numeric components.
func parseVersion(s string) ([]int, bool) {
	var ver []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, false
		}
		ver = append(ver, n)
	}
	return ver, len(ver) > 0
}
