package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/results"
)

// plantVictim is a root file standing in for /etc/shadow, and a check
// that it is unchanged.
func plantVictim(t *testing.T) (string, func()) {
	t.Helper()
	v := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(v, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return v, func() {
		t.Helper()
		if b, err := os.ReadFile(v); err != nil || string(b) != "root:secret\n" {
			t.Fatalf("the victim was written: %q... (%d bytes), %v", b[:min(len(b), 40)], len(b), err)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// report -o and k8s render -o never write through a symbolic link or
// over an existing file; an existing directory takes the page as
// <first input>.html and the manifests as <name>.yaml.
func TestOutputsRefusePlantedLinks(t *testing.T) {
	v, unchanged := plantVictim(t)
	dir := t.TempDir()
	link := filepath.Join(dir, "report.html")
	symlink(t, v, link)
	run := filepath.Join("..", "..", "internal", "report", "testdata", "one.json")
	if code := execute(context.Background(), []string{"report", run, "-o", link}); code != exitError {
		t.Errorf("report -o a symbolic link: exit %d, want %d", code, exitError)
	}
	if code := execute(context.Background(), []string{"report", run, "-o", v}); code != exitError {
		t.Errorf("report -o an existing file: exit %d, want %d", code, exitError)
	}
	yaml := filepath.Join(dir, "run.yaml")
	symlink(t, v, yaml)
	k8s := []string{"k8s", "render", "--agents", "2", "--image", "erplab:test", "-o", yaml, "--", "--dsn", "host=db"}
	if code := execute(context.Background(), k8s); code == exitOK {
		t.Error("k8s render -o a symbolic link: exit 0")
	}
	unchanged()

	pages := t.TempDir()
	if code := execute(context.Background(), []string{"report", run, "-o", pages}); code != exitOK {
		t.Fatalf("report -o DIR: exit %d", code)
	}
	k8s[len(k8s)-4] = pages
	if code := execute(context.Background(), k8s); code != exitOK {
		t.Fatalf("k8s render -o DIR: exit %d", code)
	}
	for _, p := range []string{"one.html", "erplab.yaml"} {
		if st, err := os.Stat(filepath.Join(pages, p)); err != nil || st.Size() == 0 {
			t.Errorf("%s in -o DIR: %v", p, err)
		}
	}
}

// Pages (report -o, disk --html, profile --svg) are 0600 as results
// are, or --out-mode's.
func TestReportPagesMode(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join("..", "..", "internal", "report", "testdata", "one.json")
	for _, c := range []struct {
		extra []string
		want  os.FileMode
	}{
		{nil, 0o600},
		{[]string{"--out-mode", "0644"}, 0o644 &^ umask(t)},
	} {
		page := filepath.Join(dir, fmt.Sprintf("page-%d.html", len(c.extra)))
		if code := execute(context.Background(), append([]string{"report", run, "-o", page}, c.extra...)); code != exitOK {
			t.Fatalf("report -o %s %v: exit %d", page, c.extra, code)
		}
		if st, err := os.Stat(page); err != nil || st.Mode().Perm() != c.want {
			t.Errorf("report -o %v: %v, want mode %04o", c.extra, statMode(st), c.want)
		}
	}
}

// With no --out, a symbolic link planted at ./erplab-results (root's
// results would go to the directory it points to) is refused in one
// line before anything starts, as is one at --out's name; nothing is
// written where they point.
func TestRunRefusesPlantedResultsLinks(t *testing.T) {
	v, unchanged := plantVictim(t)
	cwd, elsewhere := t.TempDir(), t.TempDir()
	symlink(t, elsewhere, filepath.Join(cwd, "erplab-results"))
	symlink(t, v, filepath.Join(cwd, "x.json"))
	nowhere := "host=/nonexistent-erplab-test port=1 dbname=x"
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "results directory: erplab-results is a symbolic link"},
		{[]string{"--out", "x.json"}, "results file x.json is a symbolic link"},
	} {
		b, err := erplab(t, cwd, append([]string{"run", "--dsn", nowhere, "--duration", "1s"}, c.args...)...).CombinedOutput()
		if exitOf(err) != exitError || !strings.Contains(string(b), c.want) || strings.Count(strings.TrimSpace(string(b)), "\n") != 0 {
			t.Errorf("run %v: %v, want exit %d and one line with %q:\n%s", c.args, err, exitError, c.want, b)
		}
	}
	if es, _ := os.ReadDir(elsewhere); len(es) != 0 {
		t.Errorf("written through the planted erplab-results: %v", es)
	}
	unchanged()
}

// statMode is "mode 0644" for st, or "no file" for nil.
func statMode(st os.FileInfo) string {
	if st == nil {
		return "no file"
	}
	return fmt.Sprintf("mode %04o", st.Mode().Perm())
}

// umask is this process's umask (the children's too), from
// /proc/self/status; 022 where it cannot be read.
func umask(t *testing.T) os.FileMode {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0o022
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "Umask:"); ok {
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return os.FileMode(n)
			}
		}
	}
	return 0o022
}

// A run's results: a symbolic link planted at X.json.tmp (where erplab
// once wrote its temporary file) is not written through; the document
// and its stream are 0600, or --out-mode's; --out naming an existing
// directory writes <time>-<workload>.json into it.
func TestRunResultsFiles(t *testing.T) {
	v, unchanged := plantVictim(t)
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "x.json")
	symlink(t, v, out+".tmp")
	run := func(args ...string) {
		t.Helper()
		full := append([]string{"run", "--dsn", dsn, "--workload", "smoke", "--users", "1", "--duration", "1s", "--think", "10ms", "--observe=false", "--progress", "0"}, args...)
		if b, err := erplab(t, dir, full...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", full, err, b)
		}
	}
	mode := func(p string) os.FileMode {
		t.Helper()
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}
	run("--out", out)
	unchanged()
	for _, p := range []string{out, filepath.Join(dir, "x.jsonl")} {
		if m := mode(p); m != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", p, m)
		}
	}
	if _, err := results.Read(out); err != nil {
		t.Fatal(err)
	}
	into := t.TempDir()
	run("--out", into, "--out-mode", "0644")
	docs, _ := filepath.Glob(filepath.Join(into, "*-smoke.json"))
	if len(docs) != 1 {
		t.Fatalf("--out DIR wrote %v, want one DIR/<time>-smoke.json", docs)
	}
	if m, want := mode(docs[0]), 0o644&^umask(t); m != want {
		t.Errorf("--out-mode 0644: mode %04o, want %04o", m, want)
	}
}

// merge -o naming one of the segment documents of the directory merged is
// a one-line usage error naming -o (not "incomplete set"), the segment
// unchanged; -o naming an existing directory writes <run-id>.json there.
func TestMergeOutNamesSegment(t *testing.T) {
	dir := copySegments(t, "1", "2")
	seg := filepath.Join(dir, "r1-1of3.json")
	before, _ := os.ReadFile(seg)
	b, err := erplab(t, dir, "merge", dir, "-o", seg).CombinedOutput()
	if exitOf(err) != exitUsage || !strings.Contains(string(b), "merge: -o "+seg+" is a file of the segment directory") || strings.Count(strings.TrimSpace(string(b)), "\n") != 0 {
		t.Errorf("-o a segment of the directory: %v\n%s", err, b)
	}
	if after, _ := os.ReadFile(seg); string(after) != string(before) {
		t.Error("the segment was changed")
	}
	other := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := erplab(t, dir, "merge", dir, "-o", other).CombinedOutput(); exitOf(err) != exitUsage || !strings.Contains(string(b), "merge: -o "+other+" exists") {
		t.Errorf("-o an existing file: %v\n%s", err, b)
	}
	full := copySegments(t, "1", "2", "3")
	into := t.TempDir()
	if b, err := erplab(t, full, "merge", full, "-o", into).CombinedOutput(); err != nil {
		t.Fatalf("-o DIR: %v\n%s", err, b)
	}
	if _, err := results.Read(filepath.Join(into, "r1.json")); err != nil {
		t.Errorf("-o DIR: %v", err)
	}
}
