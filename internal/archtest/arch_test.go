package archtest

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the rules block of docs/architecture.md from the tables of this test")

const (
	module   = "github.com/erplab/erplab/"
	pgQuery  = "github.com/pganalyze/pg_query_go/v6"
	procfs   = "github.com/prometheus/procfs"
	page     = "docs/architecture.md"
	begin    = "<!-- archtest: rules rendered by internal/archtest (go test ./internal/archtest -update); do not edit by hand -->"
	end      = "<!-- archtest: end -->"
	parserAt = "internal/rewrite"
)

// layer is a group of packages (paths relative to the module; "X/*" is
// every package under X). A package imports only packages of its own layer
// (plugins: of its own plugin) and of the layers in imports.
type layer struct {
	name, what string
	pkgs       []string
	imports    []string
}

var layers = []layer{
	{"core", "what everything rests on: scores, measuring, the results document, the load, the two registries, files, servers, DSNs, exit codes, host facts",
		[]string{"internal/apdex", "internal/conninfo", "internal/engine", "internal/exitcode", "internal/hostfacts", "internal/leftover", "internal/opmap", "internal/pgcluster", "internal/record", "internal/remedy", "internal/results", "internal/safefile", "internal/workload"},
		nil},
	{"services", "one job each, knowing no command and no plugin",
		[]string{"internal/capture", "internal/capture/*", "internal/compare", "internal/disk", "internal/doctor", "internal/erp", "internal/k8s", "internal/metrics", "internal/pgbench", "internal/pgbench/*", "internal/pgtest", "internal/profile", "internal/proxy", "internal/replay", "internal/rewrite", "internal/runenv", "internal/sampler", "internal/soak", "internal/storm", "internal/stress", "internal/top", "internal/versus/*"},
		[]string{"core"}},
	{"orchestrators", "a command's run end to end over services, and the pages drawn from their documents",
		[]string{"internal/capacity", "internal/experiment", "internal/loadtest", "internal/pgbench/cli", "internal/report"},
		[]string{"core", "services"}},
	{"plugins", "one workload or remedy each, reached only through its registry; a plugin imports no other plugin (its own subpackages aside)",
		[]string{"internal/workload/*", "internal/remedy/*"},
		[]string{"core", "services"}},
	{"registrations", "the blank imports that register every plugin",
		[]string{"internal/workload/all", "internal/remedy/all"},
		[]string{"plugins"}},
	{"command", "cobra, flags, exit codes: the only place that knows every feature",
		[]string{"cmd/erplab"},
		[]string{"core", "services", "orchestrators", "plugins", "registrations"}},
}

// edge is an import that breaks a rule, allowed because it exists today.
// Each is known debt (issue 32, item 5) or a documented exception; the test
// fails when one disappears, so the list only shrinks.
type edge struct{ from, to, why string }

var allowedImports = []edge{
	{"internal/doctor", "internal/remedy/tmpfs", "exception: `doctor fix tmpfs-temp-tablespace` applies the tmpfs remedy"},
}

// allowedHostReads are the non-test files outside hostfacts that name a path
// under /proc or /sys or call a procfs function.
var allowedHostReads = []edge{
	{"internal/doctor/checks_catalog.go", "/proc", "an evidence label (`From: \"/proc/self/mountinfo\"`), not a read"},
	{"internal/doctor/tmpfs_alldb.go", "/proc", "an evidence label (`From: \"/proc/self/mountinfo\"`), not a read"},
}

// allowedParserCalls are the files outside rewrite that call a function of
// pg_query_go (each hands text to the C parser unbounded, or builds nodes).
var allowedParserCalls = []edge{}

type pkgInfo struct {
	imports map[string][]string // module-relative import -> files (non-test)
	files   map[string]*ast.File
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return dir
}

// load parses every Go file of the module (testdata, hidden and _ dirs
// aside), by package directory relative to the root.
func load(t *testing.T, dir string) (map[string]*pkgInfo, *token.FileSet) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string]*pkgInfo{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(path))
		p := pkgs[rel]
		if p == nil {
			p = &pkgInfo{imports: map[string][]string{}, files: map[string]*ast.File{}}
			pkgs[rel] = p
		}
		relFile := filepath.Join(rel, name)
		p.files[relFile] = f
		if strings.HasSuffix(name, "_test.go") {
			return nil
		}
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(ip, module) {
				ip = strings.TrimPrefix(ip, module)
				p.imports[ip] = append(p.imports[ip], relFile)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs, fset
}

// layerOf returns the index of pkg's layer: an exact name wins over a
// pattern, a longer pattern over a shorter one.
func layerOf(pkg string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, p := range l.pkgs {
			n := -1
			switch {
			case p == pkg:
				n = 1 << 20
			case strings.HasSuffix(p, "/*") && strings.HasPrefix(pkg, strings.TrimSuffix(p, "*")):
				n = len(p)
			}
			if n > bestLen {
				best, bestLen = i, n
			}
		}
	}
	return best
}

// plugin returns the plugin a package belongs to ("internal/workload/erp"
// for internal/workload/erp and its subpackages), "" for none.
func plugin(pkg string) string {
	if layers[layerOf(pkg)].name != "plugins" {
		return ""
	}
	parts := strings.Split(pkg, "/")
	return strings.Join(parts[:3], "/")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkAllowlist reports found violations not in allowed and allowed ones
// no longer found.
func checkAllowlist(t *testing.T, rule string, found map[edge]string, allowed []edge) {
	t.Helper()
	seen := map[[2]string]bool{}
	for _, a := range allowed {
		seen[[2]string{a.from, a.to}] = true
	}
	var keys []edge
	for e := range found {
		keys = append(keys, e)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].from+keys[i].to < keys[j].from+keys[j].to })
	for _, e := range keys {
		if !seen[[2]string{e.from, e.to}] {
			t.Errorf("%s: %s -> %s (%s)", rule, e.from, e.to, found[e])
		}
		delete(seen, [2]string{e.from, e.to})
	}
	for _, a := range allowed {
		if seen[[2]string{a.from, a.to}] {
			t.Errorf("%s: allowlisted %s -> %s no longer happens: remove it from the test's list (and the page: -update)", rule, a.from, a.to)
		}
	}
}

// TestLayers: every package is in a layer; a package imports only its own
// layer or lower ones; a plugin imports no other plugin; nothing imports a
// command.
func TestLayers(t *testing.T) {
	pkgs, _ := load(t, root(t))
	found := map[edge]string{}
	for _, pkg := range sortedKeys(pkgs) {
		if pkg == "internal/archtest" || len(pkgs[pkg].imports) == 0 && layerOf(pkg) < 0 && onlyTests(pkgs[pkg]) {
			continue
		}
		from := layerOf(pkg)
		if from < 0 {
			t.Errorf("package %s is in no layer: add it to the test's layers and run -update", pkg)
			continue
		}
		for _, imp := range sortedKeys(pkgs[pkg].imports) {
			to := layerOf(imp)
			where := pkgs[pkg].imports[imp][0]
			switch {
			case to < 0:
				t.Errorf("%s imports %s, which is in no layer", pkg, imp)
			case to != from && !slices.Contains(layers[from].imports, layers[to].name):
				found[edge{from: pkg, to: imp}] = fmt.Sprintf("%s: %s imports %s", where, layers[from].name, layers[to].name)
			case plugin(pkg) != "" && plugin(imp) != "" && plugin(pkg) != plugin(imp):
				found[edge{from: pkg, to: imp}] = fmt.Sprintf("%s: a plugin imports another plugin", where)
			}
		}
	}
	checkAllowlist(t, "layers", found, allowedImports)
}

func onlyTests(p *pkgInfo) bool {
	for f := range p.files {
		if !strings.HasSuffix(f, "_test.go") {
			return false
		}
	}
	return true
}

var hostPath = regexp.MustCompile(`^/(proc|sys)(/[^ ]*)?$`)

// TestHostReads: outside hostfacts, no non-test file names a path under
// /proc or /sys (a string literal starting with one) or uses a function of
// procfs (its types, which hostfacts hands out, are fine). Prose that
// mentions a path (help, evidence, fixes) does not start with it.
func TestHostReads(t *testing.T) {
	dir := root(t)
	procfsFuncs := packageFuncs(t, dir, procfs)
	pkgs, fset := load(t, dir)
	found := map[edge]string{}
	for _, pkg := range sortedKeys(pkgs) {
		if pkg == "internal/hostfacts" {
			continue
		}
		for _, name := range sortedKeys(pkgs[pkg].files) {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f := pkgs[pkg].files[name]
			alias := importName(f, procfs, "procfs")
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || alias == "" {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == alias && procfsFuncs[sel.Sel.Name] {
					found[edge{from: name, to: procfs}] = fmt.Sprintf("%s: procfs.%s", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				if s, err := strconv.Unquote(lit.Value); err == nil && hostPath.MatchString(s) {
					e := edge{from: name, to: "/" + hostPath.FindStringSubmatch(s)[1]}
					if _, dup := found[e]; !dup {
						found[e] = fmt.Sprintf("%s: %q", fset.Position(lit.Pos()), s)
					}
				}
				return true
			})
		}
	}
	checkAllowlist(t, "host reads outside hostfacts", found, allowedHostReads)
}

// TestParserCalls: outside rewrite, no file (tests included) uses a
// function of pg_query_go: Parse, Scan, Fingerprint, Normalize, Deparse and
// the rest hand text to the C parser with no bound; rewrite's entry points
// check size and nesting first. The node types stay usable everywhere.
func TestParserCalls(t *testing.T) {
	dir := root(t)
	funcs := pgQueryFuncs(t, dir)
	pkgs, fset := load(t, dir)
	found := map[edge]string{}
	for _, pkg := range sortedKeys(pkgs) {
		if pkg == parserAt {
			continue
		}
		for _, name := range sortedKeys(pkgs[pkg].files) {
			f := pkgs[pkg].files[name]
			alias := importName(f, pgQuery, "pg_query")
			if alias == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == alias && funcs[sel.Sel.Name] {
					e := edge{from: name, to: "pg_query." + sel.Sel.Name}
					found[e] = fset.Position(sel.Pos()).String()
				}
				return true
			})
		}
	}
	checkAllowlist(t, "pg_query functions outside rewrite", found, allowedParserCalls)
}

// importName is the name f imports path under ("" when it does not).
func importName(f *ast.File, path, def string) string {
	for _, im := range f.Imports {
		if ip, _ := strconv.Unquote(im.Path.Value); ip == path {
			if im.Name != nil {
				return im.Name.Name
			}
			return def
		}
	}
	return ""
}

// pgQueryFuncs lists the exported package-level functions of pg_query_go.
func pgQueryFuncs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	funcs := packageFuncs(t, dir, pgQuery)
	if !funcs["Parse"] || !funcs["Fingerprint"] {
		t.Fatalf("pg_query_go: no Parse or Fingerprint found")
	}
	return funcs
}

// packageFuncs lists the exported package-level functions of the module
// dependency path, read from its source in the module cache.
func packageFuncs(t *testing.T, dir, path string) map[string]bool {
	t.Helper()
	bp, err := build.Import(path, dir, build.FindOnly)
	if err != nil {
		t.Fatalf("locate %s: %v", path, err)
	}
	ents, err := os.ReadDir(bp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]bool{}
	fset := token.NewFileSet()
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(bp.Dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.IsExported() {
				funcs[fd.Name.Name] = true
			}
		}
	}
	return funcs
}

// TestPage: docs/architecture.md carries the rules block rendered from this
// test's tables (-update rewrites it).
func TestPage(t *testing.T) {
	path := filepath.Join(root(t), page)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(b, []byte(begin)), bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s: no rules block (%q ... %q)", page, begin, end)
	}
	want := render()
	got := string(b[i+len(begin) : j])
	if got == want {
		return
	}
	if *update {
		out := append(append(append([]byte{}, b[:i+len(begin)]...), want...), b[j:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the rules block differs from the test's tables: go test ./internal/archtest -run TestPage -update", page)
}

func render() string {
	var b strings.Builder
	b.WriteString("\n\n| layer | packages | may import, besides its own layer | what |\n|---|---|---|---|\n")
	for _, l := range layers {
		imports := strings.Join(l.imports, ", ")
		if imports == "" {
			imports = "nothing"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", l.name, strings.Join(l.pkgs, "`, `"), imports, l.what)
	}
	b.WriteString("\n`X/*` is every package under X; the most specific entry wins (`internal/workload/all` is a registration, not a plugin). In the plugins layer a package imports only its own plugin's packages (its own and those under it), never another plugin. Test files are not held to the layers.\n")
	list := func(title string, es []edge) {
		fmt.Fprintf(&b, "\n%s", title)
		if len(es) == 0 {
			b.WriteString(" none.\n")
			return
		}
		b.WriteString("\n\n")
		for _, e := range es {
			fmt.Fprintf(&b, "- `%s` -> `%s`: %s\n", e.from, e.to, e.why)
		}
	}
	list("Imports allowed against these rules (today's; the list only shrinks):", allowedImports)
	list("Files outside `hostfacts` that name a path under /proc or /sys or call a procfs function:", allowedHostReads)
	list("Files outside `rewrite` that call a pg_query_go function:", allowedParserCalls)
	renderRegistrations(&b)
	b.WriteString("\n")
	return b.String()
}
