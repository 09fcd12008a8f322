package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Root is a directory held open: the files made through it (Create,
// WriteNew, Replace, Overwrite, Dir) are made in that directory, by a
// name in it, whatever happens to its path afterwards. A directory
// renamed or replaced by a symbolic link while a run goes on takes
// nothing elsewhere. Dir, UserDir and Parent open one; the caller
// closes it.
type Root struct {
	root *os.Root
	path string // as the user gave it, for messages
}

// Path is the directory's path as it was opened (for messages only:
// nothing is resolved through it).
func (d *Root) Path() string { return d.path }

// Join is the path of name in the directory, for messages.
func (d *Root) Join(name string) string {
	if d.path == "." {
		return name
	}
	return filepath.Join(d.path, name)
}

// Close closes the directory.
func (d *Root) Close() error { return d.root.Close() }

// checkName refuses a name that is not one entry of the directory.
func (d *Root) checkName(name string) error {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return fmt.Errorf("%s: not a file name in %s", name, d.path)
	}
	return nil
}

// named makes an error of an operation on name in the directory name
// the path the user knows.
func (d *Root) named(name string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return &fs.PathError{Op: pe.Op, Path: d.Join(name), Err: pe.Err}
	case errors.As(err, &le):
		return &fs.PathError{Op: le.Op, Path: d.Join(name), Err: le.Err}
	}
	return err
}

// refused describes what is at name (after a create found it taken).
func (d *Root) refused(name string) error {
	path := d.Join(name)
	st, err := d.root.Lstat(name)
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

// Lstat describes name in the directory without following a link.
func (d *Root) Lstat(name string) (fs.FileInfo, error) {
	if err := d.checkName(name); err != nil {
		return nil, err
	}
	st, err := d.root.Lstat(name)
	return st, d.named(name, err)
}

// Remove removes name from the directory (a file or an empty directory).
func (d *Root) Remove(name string) error {
	if err := d.checkName(name); err != nil {
		return err
	}
	return d.named(name, d.root.Remove(name))
}

// Create is the package's Create for name in the directory. The file's
// Name() is the directory's name joined with name.
func (d *Root) Create(name string, perm fs.FileMode) (*os.File, error) {
	if err := d.checkName(name); err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, perm)
	if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ELOOP) {
		return nil, d.refused(name)
	}
	return f, d.named(name, err)
}

// WriteNew is the package's WriteNew for name in the directory: the
// temporary file is made and linked to name in it.
func (d *Root) WriteNew(name string, b []byte, perm fs.FileMode) error {
	if err := d.checkName(name); err != nil {
		return err
	}
	tmp, err := d.writeTemp(name, b, perm)
	if err != nil {
		return err
	}
	defer d.root.Remove(tmp)
	err = d.root.Link(tmp, name)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = d.renameNoReplace(tmp, name)
	}
	if errors.Is(err, unix.EEXIST) {
		return d.refused(name)
	}
	if err != nil {
		return &fs.PathError{Op: "publish", Path: d.Join(name), Err: unwrapPath(err)}
	}
	return nil
}

// renameNoReplace renames old to name in the directory unless name
// exists (renameat2 RENAME_NOREPLACE on the directory's descriptor).
func (d *Root) renameNoReplace(old, name string) error {
	f, err := d.root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var rerr error
	if err := rc.Control(func(fd uintptr) {
		rerr = unix.Renameat2(int(fd), old, int(fd), name, unix.RENAME_NOREPLACE)
	}); err != nil {
		return err
	}
	return rerr
}

// unwrapPath is the errno inside a path or link error.
func unwrapPath(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}

// Replace is the package's Replace for name in the directory.
func (d *Root) Replace(name string, b []byte, perm fs.FileMode) error {
	if err := d.CheckReplace(name); err != nil {
		return err
	}
	tmp, err := d.writeTemp(name, b, perm)
	if err != nil {
		return err
	}
	if err := d.root.Rename(tmp, name); err != nil {
		d.root.Remove(tmp)
		return d.named(name, err)
	}
	return nil
}

// Overwrite is the package's Overwrite for name in the directory.
func (d *Root) Overwrite(name string, perm fs.FileMode) (*os.File, error) {
	if err := d.CheckReplace(name); err != nil {
		return nil, err
	}
	if err := d.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, d.named(name, err)
	}
	return d.Create(name, perm)
}

// CheckReplace is the package's CheckReplace for name in the directory.
func (d *Root) CheckReplace(name string) error {
	if err := d.checkName(name); err != nil {
		return err
	}
	st, err := d.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return d.named(name, err)
	}
	if !st.Mode().IsRegular() {
		return d.refused(name)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() || sys.Nlink != 1 {
		return &RefusedError{d.Join(name), "exists and is another user's file or has other links"}
	}
	return nil
}

// writeTemp writes b to a new temporary file in the directory, named
// after name, and syncs it; it returns its name. On error the file is
// removed and the error names name.
func (d *Root) writeTemp(name string, b []byte, perm fs.FileMode) (string, error) {
	var (
		f   *os.File
		tmp string
		err error
	)
	for range 10 {
		tmp = tempName(name)
		if f, err = d.Create(tmp, perm); !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		d.root.Remove(tmp)
		// The temporary name means nothing to the user: say name.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = &fs.PathError{Op: pe.Op, Path: d.Join(name), Err: pe.Err}
		}
		return "", err
	}
	return tmp, nil
}

// Dir makes the subdirectory name of the directory with mode perm
// (less the umask) when it is missing, and otherwise takes it only when
// it is a real directory (not a symbolic link) of this process's
// effective user, as the package's Dir does; it returns it held open.
func (d *Root) Dir(name string, perm fs.FileMode) (*Root, error) {
	if err := d.checkName(name); err != nil {
		return nil, err
	}
	path := d.Join(name)
	if err := d.root.Mkdir(name, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, d.named(name, err)
	}
	st, err := d.root.Lstat(name)
	if err != nil {
		return nil, d.named(name, err)
	}
	if err := ownDir(path, st); err != nil {
		return nil, err
	}
	r, err := d.root.OpenRoot(name)
	if err != nil {
		return nil, d.named(name, err)
	}
	return held(r, path, st)
}

// held checks that r, just opened at path, is the directory st that was
// judged (not another put there since), and returns it as a Root.
func held(r *os.Root, path string, st fs.FileInfo) (*Root, error) {
	now, err := r.Stat(".")
	if err != nil || !os.SameFile(st, now) {
		r.Close()
		return nil, fmt.Errorf("%s changed while it was opened: erplab writes only into the directory it checked", path)
	}
	return &Root{root: r, path: path}, nil
}

// ownDir refuses st (what is at path, not followed) unless it is a
// directory of this process's effective user.
func ownDir(path string, st fs.FileInfo) error {
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: erplab writes only into a real directory of its user there", path)
	case !st.IsDir():
		return fmt.Errorf("%s exists and is not a directory", path)
	}
	if owner(st) != os.Geteuid() {
		return fmt.Errorf("%s is a directory of another user, not of uid %d: erplab writes only into a directory of its user there", path, os.Geteuid())
	}
	return nil
}

// owner is st's owner uid, -1 when unknown.
func owner(st fs.FileInfo) int {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(sys.Uid)
	}
	return -1
}
