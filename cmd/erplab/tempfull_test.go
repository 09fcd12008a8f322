package main

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/results"
)

// fullTmpfsTablespace mounts a 4 MB tmpfs owned by the postgres user,
// makes it the temp tablespace of dsn's database and fills it with a
// file of root's up to 32 kB from full. It returns the tablespace's OID;
// the cleanup resets the setting, drops the tablespace and unmounts.
func fullTmpfsTablespace(t *testing.T, dsn string) uint32 {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a tmpfs")
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	dir, err := os.MkdirTemp("", "erplab-tempfull-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NODEV|unix.MS_NOSUID|unix.MS_NOEXEC, "size=4m,mode=0755"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("umount %s: %v", dir, err)
		}
	})
	loc := filepath.Join(dir, "ts")
	if err := os.Mkdir(loc, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(loc, uid, gid); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	db := conn.Config().Database
	ident := pgx.Identifier{db}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE TABLESPACE erplab_full_tmpfs LOCATION '"+loc+"'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		for _, q := range []string{"ALTER DATABASE " + ident + " RESET temp_tablespaces", "DROP TABLESPACE erplab_full_tmpfs"} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" SET temp_tablespaces = erplab_full_tmpfs"); err != nil {
		t.Fatal(err)
	}
	var oid uint32
	if err := conn.QueryRow(ctx, "SELECT oid FROM pg_tablespace WHERE spcname = 'erplab_full_tmpfs'").Scan(&oid); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	fill := int64(st.Bavail)*int64(st.Bsize) - 32<<10
	if err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, fill), 0o600); err != nil {
		t.Fatal(err)
	}
	return oid
}

// TestRunTempTablespaceFull: temp_table_storm on a real server whose
// temp tablespace is a tmpfs filled up to 32 kB: its executions fail
// with 53100, and run's summary says, from the errors' messages, that the
// temp tablespace is full, with the trap and the sizing rule; the results
// keep the message as the example of 53100.
func TestRunTempTablespaceFull(t *testing.T) {
	dsn := srv.NewDatabase(t)
	erpInit(t, dsn)
	oid := fullTmpfsTablespace(t, dsn)
	dir := t.TempDir()
	out, err := erplab(t, dir, "run", "--workload", "erp", "--dsn", dsn, "--scale", "0.01", "--mix", "temp_table_storm=1",
		"--users", "2", "--think", "0", "--duration", "3s", "--progress", "0", "--out", "run.json").CombinedOutput()
	if err != nil {
		if ee, ok := err.(interface{ ExitCode() int }); !ok || ee.ExitCode() == 1 {
			t.Fatalf("run: %v\n%s", err, out)
		}
	}
	s := string(out)
	want := "temp tablespace full: temp_table_storm failed "
	if !strings.Contains(s, want) || !strings.Contains(s, fmt.Sprintf("the temp tablespace pg_tblspc/%d ", oid)) ||
		!strings.Contains(s, "the trap: only DROP TABLE frees its space") || !strings.Contains(s, "the size: size it at twice the peak use") {
		t.Fatalf("no temp-tablespace-full finding for tablespace %d in:\n%s", oid, s)
	}
	doc, err := results.Read(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	fulls := results.TempFulls(doc.Operations)
	if len(fulls) != 1 || fulls[0].Op != "temp_table_storm" || fulls[0].File.Tablespace != oid || !fulls[0].File.Temp || fulls[0].Failed == 0 {
		t.Fatalf("results: %+v", fulls)
	}
	t.Logf("%s", fulls[0].Line())
	// The doctor, after the run: the tmpfs is nearly as empty as before
	// (each failure's DROP freed its space), the server log says it was
	// full.
	dout, _ := erplab(t, dir, "doctor", "--dsn", dsn, "--only", "temp-tablespace", "--sample", "0").CombinedOutput()
	if !strings.Contains(string(dout), "the tmpfs temp tablespace erplab_full_tmpfs is full: the server log has ") ||
		!strings.Contains(string(dout), "# the trap: only DROP TABLE frees its space") || !strings.Contains(string(dout), "mount -o remount,size=8m ") {
		t.Errorf("doctor:\n%s", dout)
	}
	// ERPLAB_RECORD_TEMPFULL=<dir> keeps the results file as
	// internal/results/testdata/tempfull-run.json was recorded.
	if d := os.Getenv("ERPLAB_RECORD_TEMPFULL"); d != "" {
		b, err := os.ReadFile(filepath.Join(dir, "run.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "tempfull-run.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		recordServerLog(t, dsn, filepath.Join(d, "tempfull-server.log"))
	}
}

// recordServerLog copies the last 40 lines of the server's log (the
// postmaster's standard error) to path.
func recordServerLog(t *testing.T, dsn, path string) {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pid int
	if err := conn.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	b, err := os.ReadFile("/proc/" + fields[1] + "/fd/2")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(path, []byte(strings.Join(lines[max(len(lines)-40, 0):], "")), 0o644); err != nil {
		t.Fatal(err)
	}
}
