package main

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/conninfo"
)

// realPgbench is PostgreSQL 15's pgbench, or "" when it is not installed
// (the comparison with it is then skipped, erplab's own assertions stay).
func realPgbench(t *testing.T) string {
	t.Helper()
	const p = "/usr/lib/postgresql/15/bin/pgbench"
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Log("pgbench 15 not installed: erplab not compared with it")
	return ""
}

// realPgbenchCmd is the real pgbench with args, with no PG* variables but env.
func realPgbenchCmd(path, dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PG") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// A DBNAME that is a connection string or URI (operand or PGDATABASE;
// pgbench's -d is --debug)
// is expanded as libpq does: its host and port override -h/-p, its
// application_name is the session's, a service is read from the service
// file; its password appears nowhere in the output or the results. The
// real pgbench accepts the same command lines.
func TestPgbenchConnString(t *testing.T) {
	dsn := srv.NewDatabase(t)
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	host, port, user, db := cfg.Host, strconv.Itoa(int(cfg.Port)), cfg.User, cfg.Database
	passfile := "PGPASSFILE=" + passfileOf(dsn)
	uri := "postgresql:///" + db + "?host=" + url.QueryEscape(host) + "&port=" + port
	const secret = "s3cretPgbenchDSN"

	// -i through a URI whose host and port beat -h and -p.
	cmd := erplab(t, dir, "pgbench", "-i", "-q", "-h", "/nonexistent", "-p", "1", "-U", user, uri)
	cmd.Env = append(cmd.Env, passfile)
	if code, text := exitCode(t, cmd); code != 0 || !strings.Contains(text, "done in ") {
		t.Fatalf("-i with a URI: exit %d:\n%s", code, text)
	}

	// The session's application_name must be x, else a division by zero
	// aborts the client (exit 2).
	appScript := filepath.Join(dir, "app.sql")
	if err := os.WriteFile(appScript, []byte("SELECT 1 / (current_setting('application_name') = 'x')::int;\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	service := filepath.Join(dir, "pg_service.conf")
	if err := os.WriteFile(service, []byte(fmt.Sprintf("[erplabsvc]\nhost=%s\nport=%s\ndbname=%s\nuser=%s\n", host, port, db, user)), 0o600); err != nil {
		t.Fatal(err)
	}
	kv := "host=" + conninfo.QuoteValue(host) + " port=" + port + " dbname=" + db
	pgbench := realPgbench(t)
	for _, c := range []struct {
		name string
		args []string
		env  []string
	}{
		{"URI operand over -h/-p", []string{"-n", "-S", "-t", "1", "-h", "/nonexistent", "-p", "1", "-U", user, uri}, nil},
		{"key/value operand with application_name", []string{"-n", "-t", "1", "-f", appScript, "-U", user, kv + " application_name=x"}, nil},
		{"key/value operand with a password", []string{"-n", "-S", "-t", "1", "-U", user, kv + " password=" + secret}, nil},
		{"URI operand with a password", []string{"-n", "-S", "-t", "1", "postgresql://" + user + ":" + secret + "@/" + db + "?host=" + url.QueryEscape(host) + "&port=" + port}, nil},
		{"service", []string{"-n", "-S", "-t", "1", "service=erplabsvc"}, []string{"PGSERVICEFILE=" + service}},
		{"PGDATABASE URI", []string{"-n", "-S", "-t", "1"}, []string{"PGDATABASE=" + uri + "&user=" + user}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			cmd := erplab(t, dir, append([]string{"pgbench"}, c.args...)...)
			cmd.Env = append(cmd.Env, append([]string{passfile, "ERPLAB_PGBENCH_OUT=" + out}, c.env...)...)
			code, text := exitCode(t, cmd)
			if code != 0 || !strings.Contains(text, "number of transactions actually processed: 1/1") {
				t.Fatalf("erplab pgbench %q: exit %d:\n%s", c.args, code, text)
			}
			doc, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(text, secret) || strings.Contains(string(doc), secret) {
				t.Errorf("the password is printed or recorded:\n%s\n%s", text, doc)
			}
			if strings.Contains(strings.Join(c.args, " "), secret) && !strings.Contains(string(doc), conninfo.Mask) {
				t.Errorf("no masked password in the results' command line:\n%s", doc)
			}
			if pgbench == "" {
				return
			}
			pcode, ptext := exitCode(t, realPgbenchCmd(pgbench, dir, append([]string{passfile}, c.env...), c.args...))
			if pcode != 0 {
				t.Errorf("pgbench exits %d on the same command line:\n%s", pcode, ptext)
			}
		})
	}
}

// A password file is matched as libpq does for a Unix socket: the line
// naming the socket directory is used, a "localhost" line is not (the
// socket is not libpq's default directory), by `erplab pgbench` as by
// pgbench, and by `erplab doctor --dsn` (every resolved DSN). An explicit
// password still wins over the file.
func TestPassfileSocketHost(t *testing.T) {
	withPW, base := passwordRole(t)
	cfg, err := pgconn.ParseConfig(withPW)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "one.sql")
	if err := os.WriteFile(script, []byte("SELECT 1;\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pgbench := realPgbench(t)
	port := strconv.Itoa(int(cfg.Port))
	args := []string{"pgbench", "-n", "-t", "1", "-f", script, "-h", cfg.Host, "-p", port, "-U", cfg.User, cfg.Database}
	for _, c := range []struct {
		hostField string
		ok        bool
	}{{cfg.Host, true}, {"localhost", false}} {
		t.Run(c.hostField, func(t *testing.T) {
			pass := filepath.Join(t.TempDir(), "pgpass")
			line := fmt.Sprintf("%s:%s:%s:%s:%s\n", c.hostField, port, cfg.Database, cfg.User, cfg.Password)
			if err := os.WriteFile(pass, []byte(line), 0o600); err != nil {
				t.Fatal(err)
			}
			env := []string{"PGPASSFILE=" + pass}
			cmd := erplab(t, dir, args...)
			cmd.Env = append(cmd.Env, append(env, "ERPLAB_PGBENCH_OUT="+filepath.Join(t.TempDir(), "r.json"))...)
			code, text := exitCode(t, cmd)
			if c.ok != (code == 0) || (!c.ok && code != 1) {
				t.Errorf("erplab pgbench with the %s line: exit %d:\n%s", c.hostField, code, text)
			}
			if strings.Contains(text, secretCore) {
				t.Errorf("password printed:\n%s", text)
			}
			if pgbench != "" {
				if pcode, ptext := exitCode(t, realPgbenchCmd(pgbench, dir, env, args[1:]...)); pcode != code {
					t.Errorf("pgbench exits %d, erplab %d with the %s line:\n%s", pcode, code, c.hostField, ptext)
				}
			}
			cmd = erplab(t, dir, "doctor", "--dsn", base, "--only", "wraparound", "--sample", "0", "--no-host")
			cmd.Env = append(cmd.Env, env...)
			code, text = exitCode(t, cmd)
			failed := strings.Contains(text, "authentication failed")
			if c.ok == failed || (c.ok && !strings.Contains(text, "[wraparound]")) {
				t.Errorf("erplab doctor with the %s line: exit %d:\n%s", c.hostField, code, text)
			}
			if strings.Contains(text, secretCore) {
				t.Errorf("password printed:\n%s", text)
			}
			// An explicit password wins over the file (here a wrong one).
			cmd = erplab(t, dir, "doctor", "--dsn", base, "--only", "wraparound", "--sample", "0", "--no-host")
			cmd.Env = append(cmd.Env, append(env, "PGPASSWORD=wrong")...)
			if code, text := exitCode(t, cmd); !strings.Contains(text, "authentication failed") {
				t.Errorf("PGPASSWORD=wrong with the %s line: exit %d:\n%s", c.hostField, code, text)
			}
		})
	}
}
