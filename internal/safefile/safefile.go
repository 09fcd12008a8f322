// Package safefile creates the files erplab writes outside its private
// directories (results, reports, logs in the current directory, /tmp, a
// shared volume) so that a symbolic link or a file someone else planted
// at the name is refused, never written through or over: erplab is often
// run as root where others can write. It is its one job.
//
// Create makes a new file (O_CREAT|O_EXCL|O_NOFOLLOW); WriteNew publishes
// a whole file atomically under a name that must not exist; Replace and
// Overwrite are for the few files erplab rewrites by design (a capacity
// document after every step, pgbench's -l logs), and take over only a
// regular file of this user; Dir makes or accepts a directory of this
// user that is not a symbolic link. Every refusal is one line naming the
// path; an existing name gives an error that matches fs.ErrExist.
package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// RefusedError says why a path was not written: it exists (What:
// "exists", "is a symbolic link", "is a directory", ...) and erplab does
// not take it over.
type RefusedError struct {
	Path string
	What string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s %s: erplab does not write over or through it", e.Path, e.What)
}

// Is makes a RefusedError match fs.ErrExist.
func (e *RefusedError) Is(target error) bool { return target == fs.ErrExist }

// refused describes what is at path (after a create found it taken).
func refused(path string) error {
	st, err := os.Lstat(path)
	switch {
	case err != nil:
		return &RefusedError{path, "exists"}
	case st.Mode()&fs.ModeSymlink != 0:
		return &RefusedError{path, "is a symbolic link"}
	case st.IsDir():
		return &RefusedError{path, "is a directory"}
	}
	return &RefusedError{path, "exists"}
}

// Create creates a new file at path for writing, with mode perm (less
// the umask): an existing file, directory or symbolic link there (even
// a dangling one) is refused.
func Create(path string, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, perm)
	if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ELOOP) {
		return nil, refused(path)
	}
	return f, err
}

// WriteNew writes b to a new file at path atomically: into a private
// temporary file in the same directory (a random name starting with
// ".", created as Create does), fsynced, then published under path with
// link(2) (renameat2 RENAME_NOREPLACE on a file system without hard
// links), which fails when path exists, and the temporary name removed.
// A reader sees no file or the whole file; on any error nothing is left
// behind and path is untouched. Errors name path.
func WriteNew(path string, b []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, b, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	err = unix.Link(tmp, path)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
	}
	if errors.Is(err, unix.EEXIST) {
		return refused(path)
	}
	if err != nil {
		return &fs.PathError{Op: "publish", Path: path, Err: err}
	}
	return nil
}

// Replace writes b atomically to path, replacing the file there, for a
// file the caller wrote itself and rewrites (a document updated as a run
// goes): a temporary file as in WriteNew, then rename(2) over path, which
// replaces the name and never writes through it. Path must be absent or
// a regular file of this process's user with one link; anything else is
// refused.
func Replace(path string, b []byte, perm fs.FileMode) error {
	if err := CheckReplace(path); err != nil {
		return err
	}
	tmp, err := writeTemp(path, b, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// Overwrite creates path anew for writing as fopen(path, "w") would
// (pgbench's -l logs, which pgbench users rerun into the same names), but
// only ever replaces a regular file of this process's user with one link:
// that file is unlinked and a new one created as Create does, so no
// symbolic link is followed and no other file, or other name of it, is
// changed.
func Overwrite(path string, perm fs.FileMode) (*os.File, error) {
	if err := CheckReplace(path); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return Create(path, perm)
}

// CheckReplace checks that Replace and Overwrite would take path: it is
// absent, or a regular file owned by this process's effective user with
// a single link. A caller checks before it starts work it would lose.
func CheckReplace(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return refused(path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() || sys.Nlink != 1 {
		return &RefusedError{path, "exists and is another user's file or has other links"}
	}
	return nil
}

// writeTemp writes b to a new temporary file beside path and syncs it;
// it returns its name. On error the file is removed.
func writeTemp(path string, b []byte, perm fs.FileMode) (string, error) {
	var (
		f   *os.File
		err error
	)
	for range 10 {
		if f, err = Create(tempName(path), perm); !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		// The temporary name means nothing to the user: say path.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = &fs.PathError{Op: pe.Op, Path: path, Err: pe.Err}
		}
		return "", err
	}
	return tmp, nil
}

// tempName is .<base of path>.<16 random hex>.tmp beside path.
func tempName(path string) string {
	var r [8]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails on Linux
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(r[:])+".tmp")
}

// Dir makes the directory path with mode perm (less the umask) when it
// is missing, its parent existing, and otherwise accepts it only when it
// is a real directory (not a symbolic link) owned by this process's
// effective user: the default results directory and the directories
// erplab makes for a run's files, where a planted link or another user's
// directory would take the files elsewhere.
func Dir(path string, perm fs.FileMode) error {
	err := os.Mkdir(path, perm)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: erplab writes only into a real directory of its user there", path)
	case !st.IsDir():
		return fmt.Errorf("%s exists and is not a directory", path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is a directory of another user, not of uid %d: erplab writes only into a directory of its user there", path, os.Geteuid())
	}
	return nil
}
