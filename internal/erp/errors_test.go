package erp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// diskFull returns a real 53100 from the test server: as root, a temp
// table written into a tablespace on a 1 MiB tmpfs; else the same
// SQLSTATE raised by the server itself.
func diskFull(t *testing.T) error {
	t.Helper()
	ctx := context.Background()
	pool := srv.Pool(t, srv.NewDatabase(t))
	if os.Geteuid() == 0 {
		dir := filepath.Join(srv.Cluster(t).Dir(), fmt.Sprintf("full-%d", os.Getpid()))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		u, err := user.Lookup(srv.Cluster(t).OSUser())
		if err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			err = unix.Mount("erplab-test", dir, "tmpfs", 0, fmt.Sprintf("size=1m,uid=%d,gid=%d,mode=0700", uid, gid))
		}
		if err == nil {
			t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
			ts := fmt.Sprintf("full_%d", os.Getpid())
			if _, err := pool.Exec(ctx, "CREATE TABLESPACE "+ts+" LOCATION '"+dir+"'"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_, _ = srv.Pool(t, srv.DSN(t, "postgres")).Exec(context.Background(), "DROP TABLESPACE IF EXISTS "+ts)
			})
			_, err := pool.Exec(ctx, "CREATE TABLE big TABLESPACE "+ts+" AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 100000) g")
			if err == nil {
				t.Fatal("100,000 rows fitted in a 1 MiB tmpfs")
			}
			_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS big")
			return err
		}
		t.Logf("no tmpfs (%v): the server raises 53100 itself", err)
	}
	_, err := pool.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'disk_full', MESSAGE = 'could not extend file: No space left on device'; END $$`)
	return err
}

// A disk-full error is reported with the server's message: once while the
// run goes on (say), and in the end-of-run report with its count.
func TestServerErrorsKeepTheMessage(t *testing.T) {
	pgErr := diskFull(t)
	var said []string
	w := New(WorkloadOptions{})
	w.errs.say = func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }
	for range 3 {
		w.errs.note("post_sales_invoice", fmt.Errorf("post: %w", pgErr))
	}
	w.errs.note("document_list", fmt.Errorf("not a server error"))
	var out bytes.Buffer
	w.Report(&out, nil)
	t.Log(out.String())
	if len(said) != 1 || !strings.Contains(said[0], "server error 53100 in post_sales_invoice: could not") || !strings.Contains(said[0], "No space left on device") {
		t.Errorf("progress lines %q, want one naming 53100 and the server's message", said)
	}
	if got := out.String(); !strings.Contains(got, "53100 x 3 (first in post_sales_invoice): could not") || !strings.Contains(got, "No space left on device") || strings.Contains(got, "document_list") {
		t.Errorf("report:\n%s", got)
	}
}
