package main

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../.."

// The committed generated pages (docs/commands/, docs/exit-codes.md) are
// what the commands' help and exitcode.Table say now.
func TestDocsGenerated(t *testing.T) {
	docs := filepath.Join(repoRoot, "docs")
	pages := genDocs(newRoot())
	stale := 0
	for _, name := range sortedKeys(pages) {
		got, err := os.ReadFile(filepath.Join(docs, filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(got, pages[name]) {
			t.Errorf("docs/%s is missing or stale", name)
			stale++
		}
	}
	committed, err := filepath.Glob(filepath.Join(docs, commandsDir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range committed {
		if _, ok := pages[commandsDir+"/"+filepath.Base(f)]; !ok {
			t.Errorf("docs/%s/%s is no command's page", commandsDir, filepath.Base(f))
			stale++
		}
	}
	if len(pages) < 20 || pages["commands/erplab_run.md"] == nil {
		t.Errorf("generated %d pages, no erplab_run.md among them", len(pages))
	}
	if stale > 0 {
		t.Errorf("regenerate them with: %s", regenerateDocs)
	}
}

// mdLink is a Markdown inline link's target: ](target) or ](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// Every relative link of README.md and docs/**/*.md names a file or
// folder that exists.
func TestDocLinks(t *testing.T) {
	files := []string{filepath.Join(repoRoot, "README.md")}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	links := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if u, err := url.Parse(target); err != nil || u.Scheme != "" || strings.HasPrefix(target, "#") {
					continue // absolute URL, mail address or an anchor in the same page
				}
				target, _, _ = strings.Cut(target, "#")
				links++
				if _, err := os.Stat(filepath.Join(filepath.Dir(f), filepath.FromSlash(target))); err != nil {
					rel, _ := filepath.Rel(repoRoot, f)
					t.Errorf("%s:%d: link to %s: no such file", rel, i+1, m[1])
				}
			}
		}
	}
	if links < 30 {
		t.Errorf("found %d relative links in %d files: the link pattern misses them", links, len(files))
	}
}

// TestReadmeDoctorSampleTime: the README's doctor example says how long
// its sampling takes, and that is --windows (the default) times its
// --sample: a reader who runs it knows what to wait for.
func TestReadmeDoctorSampleTime(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	ex := regexp.MustCompile(`erplab doctor [^\n]*--sample (\d+)s`).FindSubmatch(b)
	said := regexp.MustCompile("`--windows` windows of `--sample` each: (\\d+) x (\\d+) s, (\\d+) s here").FindSubmatch(b)
	if ex == nil || said == nil {
		t.Fatalf("README: doctor example %q, its sampling time %q", ex, said)
	}
	windows := newDoctorCmd().Flags().Lookup("windows").DefValue
	if string(said[1]) != windows || string(said[2]) != string(ex[1]) {
		t.Errorf("README says %s x %s s, the example samples %s windows of %s s", said[1], said[2], windows, ex[1])
	}
	var w, s, total int
	if _, err := fmt.Sscan(string(said[1])+" "+string(said[2])+" "+string(said[3]), &w, &s, &total); err != nil || w*s != total {
		t.Errorf("README: %d x %d s is not %d s (%v)", w, s, total, err)
	}
}
