package remedy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/remedy"
	_ "github.com/erplab/erplab/internal/remedy/all"
)

// counted is a kind of this test: Apply and Undo count their calls.
var applies, undos int

func init() {
	remedy.Register(remedy.Kind{
		Name:      "test-counted",
		Doc:       "counts\nits calls",
		NeedsRoot: "",
		Params:    []remedy.Param{{Name: "test-param", Default: "dflt"}},
		Apply: func(_ context.Context, t *remedy.Target, arg string) (*remedy.Effect, error) {
			applies++
			t.Flags["counted"] = t.Param("test-param")
			return nil, nil
		},
		Undo: func(_ context.Context, _ *remedy.Target, e *remedy.Effect) error {
			undos++
			e.Changed["undone"] = undos
			return nil
		},
	})
}

// The parse errors of the built-in remedies, word for word.
func TestParseErrors(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "empty.conf")
	if err := os.WriteFile(conf, []byte("# nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"temp-style:oracle", `remedy "temp-style:oracle": temp-style must be 1c or lsfusion`},
		{"temp-style", `remedy "temp-style": temp-style must be 1c or lsfusion`},
		{"settings", `remedy "settings": settings needs a file, settings:FILE`},
		{"settings:/no/such.conf", `remedy "settings:/no/such.conf": settings file: open /no/such.conf: no such file or directory`},
		{"settings:" + conf, `remedy "settings:` + conf + `": settings file ` + conf + `: no settings`},
		{"rewrite-proxy:1", `remedy "rewrite-proxy:1": rewrite-proxy takes no argument`},
		{" tmpfs-temp-tablespace:x", `remedy " tmpfs-temp-tablespace:x": tmpfs-temp-tablespace takes no argument`},
		{"foo", `unknown remedy "foo" (known: rewrite-proxy, settings:FILE, temp-style:1c|lsfusion, test-counted, thp:never|madvise|always, tmpfs-temp-tablespace)`},
		{"thp:sometimes", `remedy "thp:sometimes": transparent_hugepage/enabled takes always, madvise, never, not "sometimes"`},
	} {
		_, err := remedy.Parse(tc.in)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q): got %v, want %s", tc.in, err, tc.want)
		}
	}
	for _, in := range []string{"temp-style:1c", "temp-style:lsfusion", " rewrite-proxy ", "tmpfs-temp-tablespace", "thp:never", "thp:always"} {
		r, err := remedy.Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if r.String() != strings.TrimSpace(in) {
			t.Fatalf("Parse(%q).String() = %q", in, r.String())
		}
	}
}

// ab's help lists each remedy with its syntax, what it does, why it
// needs root and why it needs cold runs.
func TestWriteHelp(t *testing.T) {
	var b strings.Builder
	if err := remedy.WriteHelp(&b); err != nil {
		t.Fatal(err)
	}
	want := `  rewrite-proxy            the run's connections go through an in-process erplab proxy
  settings:FILE            GUCs of a postgresql.conf-style file: ALTER SYSTEM SET + pg_reload_conf()
                           before the run, ALTER SYSTEM RESET after (reloadable settings only; a restart
                           for postmaster ones with ab --dsn --allow-restart; see examples/erp-profile.conf)
  temp-style:1c|lsfusion   how the ERP workload treats temp tables in this run
  test-counted             counts
                           its calls
  thp:never|madvise|always the host's transparent huge pages mode (transparent_hugepage/enabled) for the run, set back after;
                           the server is restarted under it (see --thp-defrag, --thp-shmem)
                           root only: it writes the kernel's transparent_hugepage files
                           with --cold only: THP applies to memory mapped after the change
  tmpfs-temp-tablespace    temp tables on a tmpfs tablespace (erplab doctor's fix), undone after
                           root only: it mounts a tmpfs
`
	if b.String() != want {
		t.Fatalf("help:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestApplyUndoOnce(t *testing.T) {
	applies, undos = 0, 0
	r, err := remedy.Parse("test-counted")
	if err != nil {
		t.Fatal(err)
	}
	tg := &remedy.Target{Flags: map[string]string{}}
	a, err := remedy.Apply(context.Background(), tg, r)
	if err != nil {
		t.Fatal(err)
	}
	if applies != 1 || tg.Flags["counted"] != "dflt" {
		t.Fatalf("applies %d, flags %v", applies, tg.Flags)
	}
	tg.Params = map[string]string{"test-param": "given"}
	if got := tg.Param("test-param"); got != "given" {
		t.Fatalf("Param = %q", got)
	}
	for range 2 {
		if err := a.Undo(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	rec := a.Record()
	if undos != 1 || rec.Remedy != "test-counted" || rec.Kind != "test-counted" || rec.Changed["undone"] != 1 {
		t.Fatalf("undos %d, record %+v", undos, rec)
	}
}

func TestNeedsRootRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root")
	}
	r, err := remedy.Parse("tmpfs-temp-tablespace")
	if err != nil {
		t.Fatal(err)
	}
	_, err = remedy.Apply(context.Background(), &remedy.Target{Flags: map[string]string{}}, r)
	want := "remedy tmpfs-temp-tablespace needs root (it mounts a tmpfs); run erplab ab as root or drop the remedy"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// TestCheckRunnable: a remedy the process cannot apply (not root, a bad
// parameter value) is refused before anything starts, naming the command.
func TestCheckRunnable(t *testing.T) {
	r, err := remedy.Parse("tmpfs-temp-tablespace")
	if err != nil {
		t.Fatal(err)
	}
	rs := []remedy.Remedy{r}
	err = remedy.CheckRunnable("capacity", rs, nil, false)
	if want := "remedy tmpfs-temp-tablespace needs root (it mounts a tmpfs); run erplab capacity as root or drop the remedy"; err == nil || err.Error() != want {
		t.Fatalf("not root: got %v, want %s", err, want)
	}
	err = remedy.CheckRunnable("capacity", rs, map[string]string{"tmpfs-size": "banana"}, true)
	if err == nil || !strings.Contains(err.Error(), `--tmpfs-size "banana" (remedy tmpfs-temp-tablespace): size "banana"`) {
		t.Fatalf("bad size: got %v", err)
	}
	if err := remedy.CheckRunnable("capacity", rs, map[string]string{"tmpfs-size": "64M"}, true); err != nil {
		t.Fatalf("good size refused: %v", err)
	}
	if err := remedy.CheckRunnable("capacity", rs, nil, true); err != nil {
		t.Fatalf("default size refused: %v", err)
	}
}
