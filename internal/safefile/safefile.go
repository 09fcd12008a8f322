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
// regular file of this user. Every refusal is one line naming the path;
// an existing name gives an error that matches fs.ErrExist.
//
// Every write happens relative to a directory held open (a Root): the
// path-taking functions open the file's parent once and make the file,
// its temporary file and the link that publishes it by name in that
// directory, so a parent renamed or swapped for a symbolic link half-way
// cannot send the file elsewhere. A directory erplab writes many files
// into (a results directory, a capacity search's steps) is opened once,
// and every file goes through its Root:
//
//   - Dir (./erplab-results, the directories erplab makes for a run's
//     files, and Root.Dir for their subdirectories): made when missing;
//     an existing one is taken only when it is a real directory, not a
//     symbolic link, of this process's effective user.
//   - UserDir (a directory the user named: run --out DIR): made when
//     missing (parents too); a symbolic link at its last component is
//     followed only when every link on the way and the directory it
//     reaches belong to this user or to root, so a link another user
//     planted is refused; the directory reached must belong to this user
//     or root.
//   - Parent (the directory of a file the user named: --out X.json,
//     report -o): opened as the user wrote it, links followed.
//
// Each checks the directory it opened is the one it judged (same device
// and inode), so a swap between the check and the open is refused too.
package safefile

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// Parent opens the directory of path as written (links followed: the
// user named it) and returns it with path's last element, the name to
// make in it.
func Parent(path string) (*Root, string, error) {
	dir, name := filepath.Split(path)
	if name == "" || name == "." || name == ".." {
		return nil, "", fmt.Errorf("%s: not a file name", path)
	}
	dir = filepath.Clean(cmp.Or(dir, "."))
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, "", err
	}
	return &Root{root: r, path: dir}, name, nil
}

// inParent runs do on path's name in its directory held open.
func inParent(path string, do func(d *Root, name string) error) error {
	d, name, err := Parent(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return do(d, name)
}

// Create creates a new file at path for writing, with mode perm (less
// the umask): an existing file, directory or symbolic link there (even
// a dangling one) is refused.
func Create(path string, perm fs.FileMode) (f *os.File, err error) {
	err = inParent(path, func(d *Root, name string) (err error) {
		f, err = d.Create(name, perm)
		return err
	})
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
	return inParent(path, func(d *Root, name string) error { return d.WriteNew(name, b, perm) })
}

// Replace writes b atomically to path, replacing the file there, for a
// file the caller wrote itself and rewrites (a document updated as a run
// goes): a temporary file as in WriteNew, then rename(2) over path, which
// replaces the name and never writes through it. Path must be absent or
// a regular file of this process's user with one link; anything else is
// refused.
func Replace(path string, b []byte, perm fs.FileMode) error {
	return inParent(path, func(d *Root, name string) error { return d.Replace(name, b, perm) })
}

// Overwrite creates path anew for writing as fopen(path, "w") would
// (pgbench's -l logs, which pgbench users rerun into the same names), but
// only ever replaces a regular file of this process's user with one link:
// that file is unlinked and a new one created as Create does, so no
// symbolic link is followed and no other file, or other name of it, is
// changed.
func Overwrite(path string, perm fs.FileMode) (f *os.File, err error) {
	err = inParent(path, func(d *Root, name string) (err error) {
		f, err = d.Overwrite(name, perm)
		return err
	})
	return f, err
}

// CheckReplace checks that Replace and Overwrite would take path: it is
// absent, or a regular file owned by this process's effective user with
// a single link. A caller checks before it starts work it would lose.
func CheckReplace(path string) error {
	return inParent(path, func(d *Root, name string) error { return d.CheckReplace(name) })
}

// tempName is .<name>.<16 random hex>.tmp, a name beside name.
func tempName(name string) string {
	var r [8]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails on Linux
	return "." + name + "." + hex.EncodeToString(r[:]) + ".tmp"
}

// Dir makes the directory path with mode perm (less the umask) when it
// is missing, its parent existing, and otherwise accepts it only when it
// is a real directory (not a symbolic link) owned by this process's
// effective user: the default results directory and the directories
// erplab makes for a run's files, where a planted link or another user's
// directory would take the files elsewhere. It returns the directory
// held open: every file of the run goes through it.
func Dir(path string, perm fs.FileMode) (*Root, error) {
	if err := os.Mkdir(path, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if err := ownDir(path, st); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	return held(r, path, st)
}

// maxLinks is how many symbolic links UserDir follows (Linux's
// MAXSYMLINKS).
const maxLinks = 40

// UserDir opens a directory the user named (run --out DIR), made with
// its parents (mode perm less the umask) when missing. A symbolic link
// at its last component is followed only when it, and every link it
// leads to, belongs to this process's effective user or root; the
// directory reached must belong to this user or root. It returns the
// directory held open.
func UserDir(path string, perm fs.FileMode) (*Root, error) {
	if err := os.MkdirAll(path, perm); err != nil {
		return nil, err
	}
	p := path
	for hops := 0; ; hops++ {
		st, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			if !st.IsDir() {
				return nil, fmt.Errorf("%s exists and is not a directory", path)
			}
			if !mineOrRoot(st) {
				return nil, fmt.Errorf("%s is a directory of another user (uid %d), neither this user's nor root's: erplab does not write into it", reached(path, p), owner(st))
			}
			r, err := os.OpenRoot(p)
			if err != nil {
				return nil, err
			}
			d, err := held(r, p, st)
			if d != nil {
				d.path = path
			}
			return d, err
		}
		if hops == maxLinks {
			return nil, fmt.Errorf("%s: too many levels of symbolic links", path)
		}
		if !mineOrRoot(st) {
			return nil, fmt.Errorf("%s is a symbolic link of another user (uid %d), neither this user's nor root's: erplab does not follow it", reached(path, p), owner(st))
		}
		t, err := os.Readlink(p)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(p), t)
		}
		p = t
	}
}

// reached is "path" or "path (-> p)" when links led from path to p.
func reached(path, p string) string {
	if p == path {
		return path
	}
	return path + " (-> " + p + ")"
}

// mineOrRoot says whether st belongs to this process's effective user or root.
func mineOrRoot(st fs.FileInfo) bool {
	o := owner(st)
	return o == os.Geteuid() || o == 0
}
