package safefile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// victim is a file standing in for /etc/shadow: a test plants a link to
// it and checks afterwards that it is unchanged.
func victim(t *testing.T) (path string, check func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(path, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		t.Helper()
		if b, err := os.ReadFile(path); err != nil || string(b) != "root:secret\n" {
			t.Fatalf("the victim was changed: %q, %v", b, err)
		}
	}
}

// onlyFiles fails unless dir holds exactly the names want (no
// temporary file left behind).
func onlyFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s holds %v, want %v", dir, got, want)
	}
}

// A symbolic link (live or dangling) or a file at the name is refused by
// Create and WriteNew with one line naming the path; nothing is written
// through the link and no temporary file is left.
func TestNewFilesRefuseLinksAndExistingFiles(t *testing.T) {
	v, unchanged := victim(t)
	dir := t.TempDir()
	link := filepath.Join(dir, "r.json")
	dangling := filepath.Join(dir, "d.json")
	existing := filepath.Join(dir, "e.json")
	for _, err := range []error{os.Symlink(v, link), os.Symlink(filepath.Join(dir, "nowhere"), dangling), os.WriteFile(existing, []byte("mine"), 0o600)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ path, what string }{{link, "is a symbolic link"}, {dangling, "is a symbolic link"}, {existing, "exists"}, {dir, "is a directory"}}
	for _, c := range cases {
		f, err := Create(c.path, 0o600)
		if f != nil {
			f.Close()
		}
		if !errors.Is(err, fs.ErrExist) || err.Error() != c.path+" "+c.what+": erplab does not write over or through it" {
			t.Errorf("Create(%s): %v", c.path, err)
		}
		if err := WriteNew(c.path, []byte("results"), 0o600); !errors.Is(err, fs.ErrExist) || !strings.HasPrefix(err.Error(), c.path+" "+c.what+": ") {
			t.Errorf("WriteNew(%s): %v", c.path, err)
		}
	}
	unchanged()
	onlyFiles(t, dir, "d.json", "e.json", "r.json")
	if b, _ := os.ReadFile(existing); string(b) != "mine" {
		t.Fatalf("existing file now %q", b)
	}
}

// WriteNew publishes the whole file with its mode under a new name and
// leaves nothing else.
func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	if err := WriteNew(p, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%v, %v", st, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "{}\n" {
		t.Fatalf("content %q", b)
	}
	onlyFiles(t, dir, "r.json")
}

// Replace and Overwrite take over a regular file of this user only: a
// symbolic link, a file with another name (a hard link) or another
// user's file is refused and left as it is.
func TestReplaceAndOverwriteOnlyOwnFiles(t *testing.T) {
	v, unchanged := victim(t)
	dir := t.TempDir()
	own, link, hard := filepath.Join(dir, "own"), filepath.Join(dir, "link"), filepath.Join(dir, "hard")
	if err := os.WriteFile(own, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(v, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(v, hard); err != nil {
		t.Fatal(err)
	}
	if err := Replace(own, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(own); string(b) != "new" {
		t.Fatalf("replaced file holds %q", b)
	}
	f, err := Overwrite(own, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("log")
	f.Close()
	if b, _ := os.ReadFile(own); string(b) != "log" {
		t.Fatalf("overwritten file holds %q", b)
	}
	for _, p := range []string{link, hard} {
		if err := Replace(p, []byte("x"), 0o600); !errors.Is(err, fs.ErrExist) {
			t.Errorf("Replace(%s): %v", p, err)
		}
		if f, err := Overwrite(p, 0o600); !errors.Is(err, fs.ErrExist) {
			f.Close()
			t.Errorf("Overwrite(%s): %v", p, err)
		}
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(dir, "other")
		if err := os.WriteFile(other, []byte("theirs"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := Replace(other, []byte("x"), 0o600); err == nil || !strings.Contains(err.Error(), "exists and is another user's file") {
			t.Errorf("Replace(another user's file): %v", err)
		}
	}
	unchanged()
	want := []string{"hard", "link", "own"}
	if os.Geteuid() == 0 {
		want = []string{"hard", "link", "other", "own"}
	}
	onlyFiles(t, dir, want...)
}

// Dir makes a missing directory and accepts an existing one of this
// user; a symbolic link (even to a directory of this user), a file or
// another user's directory is refused.
func TestDir(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "erplab-results")
	for _, what := range []string{"missing", "existing own"} {
		r, err := Dir(d, 0o755)
		if err != nil {
			t.Fatalf("%s directory: %v", what, err)
		}
		r.Close()
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(d, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(link, 0o755); err == nil || err.Error() != link+" is a symbolic link: erplab writes only into a real directory of its user there" {
		t.Errorf("symlink: %v", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(file, 0o755); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("file: %v", err)
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(dir, "other")
		if err := os.Mkdir(other, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := Dir(other, 0o755); err == nil || !strings.Contains(err.Error(), "a directory of another user") {
			t.Errorf("another user's directory: %v", err)
		}
	}
}

// On a full disk (a 64 KiB tmpfs) WriteNew fails with ENOSPC naming the
// file, and leaves neither the file nor its temporary one.
func TestWriteNewFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("erplab-test", dir, "tmpfs", 0, "size=64k,mode=0700"); err != nil {
		t.Skipf("no tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	p := filepath.Join(dir, "r.json")
	err := WriteNew(p, bytes.Repeat([]byte("x"), 1<<20), 0o600)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), p+": no space left on device") {
		t.Fatalf("error %v, want ENOSPC naming %s", err, p)
	}
	onlyFiles(t, dir)
}

// swapForLink renames the directory dir away (it returns the new name)
// and plants a symbolic link to elsewhere at its name, as a user who
// owns dir's parent can at any time.
func swapForLink(t *testing.T, dir, elsewhere string) string {
	t.Helper()
	moved := dir + ".moved"
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	return moved
}

// A directory swapped for a symbolic link after Dir opened it takes
// nothing elsewhere: every file (Create, WriteNew, Replace, Overwrite, a
// subdirectory and its files) lands in the directory Dir opened.
func TestRootHeldAfterSwap(t *testing.T) {
	parent, elsewhere := t.TempDir(), t.TempDir()
	d := filepath.Join(parent, "erplab-results")
	r, err := Dir(d, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	moved := swapForLink(t, d, elsewhere)
	if err := r.WriteNew("run.json", []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := r.Create("run.jsonl", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := r.Replace("cap.json", []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err = r.Overwrite("step.log", 0o600); err != nil {
		t.Fatal(err)
	}
	f.Close()
	steps, err := r.Dir("cap-steps", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer steps.Close()
	if err := steps.WriteNew("step-01.json", []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	onlyFiles(t, elsewhere)
	onlyFiles(t, moved, "cap-steps", "cap.json", "run.json", "run.jsonl", "step.log")
	onlyFiles(t, filepath.Join(moved, "cap-steps"), "step-01.json")
	if got := steps.Join("step-01.json"); got != filepath.Join(d, "cap-steps", "step-01.json") {
		t.Errorf("name for messages %q", got)
	}
	// A subdirectory that is a link is refused as Dir refuses it.
	if err := os.Symlink(elsewhere, filepath.Join(moved, "link-steps")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Dir("link-steps", 0o755); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("subdirectory link: %v", err)
	}
}

// UserDir (run --out DIR) follows a symbolic link of this user or root
// to a directory of this user or root, and refuses a link of another
// user, or one reaching another user's directory.
func TestUserDir(t *testing.T) {
	base := t.TempDir()
	mine := filepath.Join(base, "mine")
	r, err := UserDir(filepath.Join(mine, "new", "deeper"), 0o755)
	if err != nil {
		t.Fatalf("missing directories: %v", err)
	}
	r.Close()
	link := filepath.Join(base, "link")
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	if r, err = UserDir(link, 0o755); err != nil {
		t.Fatalf("own link to own directory: %v", err)
	}
	if err := r.WriteNew("x.json", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := os.Stat(filepath.Join(mine, "x.json")); err != nil {
		t.Errorf("not written through the own link: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("other users' links and directories need root to make")
	}
	other := filepath.Join(base, "other")
	if err := os.Mkdir(other, 0o777); err != nil {
		t.Fatal(err)
	}
	theirLink, toTheirs := filepath.Join(base, "their-link"), filepath.Join(base, "to-theirs")
	for _, err := range []error{os.Chown(other, 65534, 65534), os.Symlink(mine, theirLink), os.Lchown(theirLink, 65534, 65534), os.Symlink(other, toTheirs)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ path, want string }{
		{theirLink, theirLink + " is a symbolic link of another user (uid 65534)"},
		{toTheirs, toTheirs + " (-> " + other + ") is a directory of another user (uid 65534)"},
		{other, other + " is a directory of another user (uid 65534)"},
	} {
		if _, err := UserDir(c.path, 0o755); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("UserDir(%s): %v, want %q", c.path, err, c.want)
		}
	}
	onlyFiles(t, other)
}
