package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/pgcluster"
)

// walStopTimeout bounds the wait for the postmaster's fast shutdown.
const walStopTimeout = time.Minute

// PutWALOn moves the WAL of the throwaway cluster c onto path, the way
// initdb --waldir lays it out (app-initdb.html): a fresh directory
// erplab-wal-* under path, owned by the server's OS user with mode 0700,
// takes the contents of pg_wal and pg_wal becomes a symbolic link to it.
// The server is stopped for the move (fast shutdown, SIGINT to the
// postmaster, then waiting until postmaster.pid is gone) and started again
// with c.Restart; then the current WAL file (pg_walfile_name of
// pg_current_wal_lsn) must exist in the new directory, or an error says
// so. It returns the directory, recorded in erplab's crash-safe record
// before it is made (leftover.MkdirTemp: the next erplab command removes
// it after a kill -9); the caller removes it with RemoveWALDir after
// c.Stop, which removes the link but not its target. On error the
// directory is removed when the WAL never moved; a server that did not
// come back is the caller's to Stop. Only for a cluster erplab started
// itself: a server reached by DSN cannot be stopped and rearranged.
func PutWALOn(ctx context.Context, c *pgcluster.Cluster, path string) (dir string, err error) {
	rec, err := leftover.Open()
	if err != nil {
		return "", fmt.Errorf("disk: wal on path: %w", err)
	}
	dir, e, err := rec.MkdirTemp(path, "erplab-wal-")
	if err != nil {
		return "", fmt.Errorf("disk: wal on path: %w", err)
	}
	moved := false
	defer func() {
		if err != nil && !moved {
			_ = rec.RemoveDir(e)
		}
	}()
	if err := chownTo(dir, c.OSUser()); err != nil {
		return "", err
	}
	if err := stopPostmaster(ctx, c); err != nil {
		return "", err
	}
	pgwal := filepath.Join(c.DataDir(), "pg_wal")
	if err := copyTree(pgwal, dir, c.OSUser()); err != nil {
		return "", fmt.Errorf("disk: wal on path: copy %s to %s: %w", pgwal, dir, err)
	}
	moved = true
	if err := os.RemoveAll(pgwal); err != nil {
		return dir, fmt.Errorf("disk: wal on path: %w", err)
	}
	if err := os.Symlink(dir, pgwal); err != nil {
		return dir, fmt.Errorf("disk: wal on path: %w", err)
	}
	if err := c.Restart(ctx); err != nil {
		return dir, fmt.Errorf("disk: wal on path: %w", err)
	}
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return dir, fmt.Errorf("disk: wal on path: %w", err)
	}
	defer conn.Close(context.Background())
	var name string
	if err := conn.QueryRow(ctx, "SELECT pg_walfile_name(pg_current_wal_lsn())").Scan(&name); err != nil {
		return dir, fmt.Errorf("disk: wal on path: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
		return dir, fmt.Errorf("disk: wal on path: current WAL file not in %s: %w", dir, err)
	}
	return dir, nil
}

// stopPostmaster asks c's postmaster for a fast shutdown
// (server-shutdown.html) and waits until it removed postmaster.pid.
func stopPostmaster(ctx context.Context, c *pgcluster.Cluster) error {
	pid := c.PID()
	if pid <= 0 {
		return errors.New("disk: wal on path: the server is not running")
	}
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		return fmt.Errorf("disk: wal on path: stop server: %w", err)
	}
	pidFile := filepath.Join(c.DataDir(), "postmaster.pid")
	deadline := time.Now().Add(walStopTimeout)
	for {
		if _, err := os.Stat(pidFile); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("disk: wal on path: server (pid %d) still running %s after SIGINT", pid, walStopTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("disk: wal on path: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// copyTree copies the directories and regular files under src into the
// existing directory dst, fsyncing each file, owned by OS user osUser
// ("" = unchanged).
func copyTree(src, dst, osUser string) error {
	uid, gid := -1, -1
	if osUser != "" {
		u, err := user.Lookup(osUser)
		if err != nil {
			return err
		}
		if uid, err = strconv.Atoi(u.Uid); err != nil {
			return err
		}
		if gid, err = strconv.Atoi(u.Gid); err != nil {
			return err
		}
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.Mkdir(to, 0o700); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(p, to); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: not a file or directory", p)
		}
		if uid >= 0 {
			return os.Chown(to, uid, gid)
		}
		return nil
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// RemoveWALDir removes a directory of PutWALOn with its files and its
// record (after the server's Stop). Errors: the removal failed.
func RemoveWALDir(dir string) error {
	rec, err := leftover.Open()
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	if err := rec.RemoveDirAt(dir); err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	return nil
}
