package archtest

import (
	"fmt"
	"go/ast"
	"go/token"
	"strings"
	"testing"
)

// registration is one plugin kind's registry: the call that registers one
// and what must sit in the same file as that call.
type registration struct {
	kind string
	// call is the registering function: "workload.Register" (the exported
	// function of a core package, called from any package) or "register"
	// (the package-private function of pkg).
	call string
	pkg  string
	// impl says what the registered value names that must be declared in
	// the registering file: "run" (the function in the run field of a
	// composite literal of type elem), "type" (the type of the composite
	// literal: a rule is a type with methods name and apply), "" nothing.
	impl, elem string
}

var registrations = []registration{
	{kind: "workload", call: "workload.Register", pkg: "internal/workload"},
	{kind: "remedy", call: "remedy.Register", pkg: "internal/remedy"},
	{kind: "doctor check", call: "register", pkg: "internal/doctor", impl: "run", elem: "Check"},
	{kind: "rewrite rule", call: "register", pkg: "internal/rewrite", impl: "type", elem: "rule"},
}

// TestRegistration: outside test files, every workload, remedy, doctor
// check and rewrite rule is registered by one call in a func init; a doctor
// check's Check literal and a rewrite rule's type are registered in the
// file that declares its run function or the type, each such literal or
// type is registered, and neither package builds a list of them.
func TestRegistration(t *testing.T) {
	pkgs, fset := load(t, root(t))
	for _, pkg := range sortedKeys(pkgs) {
		for _, name := range sortedKeys(pkgs[pkg].files) {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f := pkgs[pkg].files[name]
			for _, r := range registrations {
				for _, msg := range r.violations(pkg, f, fset) {
					t.Errorf("%s: %s", r.kind, msg)
				}
			}
		}
	}
}

// violations returns the rule's violations in file f of package pkg.
func (r registration) violations(pkg string, f *ast.File, fset *token.FileSet) []string {
	isCall := r.matcher(pkg, f)
	if isCall == nil {
		return nil
	}
	var out []string
	registered := map[*ast.CompositeLit]bool{}
	inInit := map[*ast.CallExpr]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || fd.Name.Name != "init" {
			continue
		}
		for _, s := range fd.Body.List {
			if es, ok := s.(*ast.ExprStmt); ok {
				if c, ok := es.X.(*ast.CallExpr); ok && isCall(c) {
					inInit[c] = true
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok || !isCall(c) {
			return true
		}
		at := fset.Position(c.Pos())
		if !inInit[c] {
			out = append(out, fmt.Sprintf("%s: %s called outside a func init (a statement of its body)", at, r.call))
		}
		if r.impl == "" {
			return true
		}
		lit, ok := c.Args[0].(*ast.CompositeLit)
		if !ok {
			out = append(out, fmt.Sprintf("%s: %s of no %s literal", at, r.call, r.elem))
			return true
		}
		registered[lit] = true
		if n := r.implName(lit); n == "" || !declares(f, n) {
			out = append(out, fmt.Sprintf("%s: %s(%s) registered away from the file declaring it", at, r.call, n))
		}
		return true
	})
	if r.impl != "" {
		out = append(out, r.unregistered(f, fset, registered)...)
	}
	return out
}

// matcher returns what recognises a registering call in file f of pkg,
// nil when f cannot make one.
func (r registration) matcher(pkg string, f *ast.File) func(*ast.CallExpr) bool {
	if r.call == "register" {
		if pkg != r.pkg {
			return nil
		}
		return func(c *ast.CallExpr) bool {
			id, ok := c.Fun.(*ast.Ident)
			return ok && id.Name == "register" && len(c.Args) == 1
		}
	}
	pkgName, fn, _ := strings.Cut(r.call, ".")
	alias := importName(f, module+r.pkg, pkgName)
	if alias == "" {
		return nil
	}
	return func(c *ast.CallExpr) bool {
		sel, ok := c.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != fn {
			return false
		}
		id, ok := sel.X.(*ast.Ident)
		return ok && id.Name == alias
	}
}

// implName is the name a registered literal must have declared in its
// file: its run function or its type.
func (r registration) implName(lit *ast.CompositeLit) string {
	if r.impl == "type" {
		if id, ok := lit.Type.(*ast.Ident); ok {
			return id.Name
		}
		return ""
	}
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == r.impl {
				if v, ok := kv.Value.(*ast.Ident); ok {
					return v.Name
				}
			}
		}
	}
	return ""
}

// unregistered reports, in f, the literals of r.elem not registered (a
// Check built anywhere else, a list of them) and, for rules, the types
// with methods name and apply that f declares but no init of f registers.
func (r registration) unregistered(f *ast.File, fset *token.FileSet, registered map[*ast.CompositeLit]bool) []string {
	var out []string
	regTypes := map[string]bool{}
	for lit := range registered {
		if id, ok := lit.Type.(*ast.Ident); ok {
			regTypes[id.Name] = true
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok || registered[lit] {
			return true
		}
		switch t := lit.Type.(type) {
		case *ast.Ident:
			if r.impl == "run" && t.Name == r.elem {
				out = append(out, fmt.Sprintf("%s: a %s literal not registered by an init", fset.Position(lit.Pos()), r.elem))
			}
		case *ast.ArrayType:
			if id, ok := t.Elt.(*ast.Ident); ok && id.Name == r.elem {
				out = append(out, fmt.Sprintf("%s: a list of %s (each registers itself instead)", fset.Position(lit.Pos()), r.elem))
			}
		}
		return true
	})
	if r.impl == "type" {
		methods := map[string]map[string]bool{}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && len(fd.Recv.List) == 1 {
				tn := recvType(fd.Recv.List[0].Type)
				if methods[tn] == nil {
					methods[tn] = map[string]bool{}
				}
				methods[tn][fd.Name.Name] = true
			}
		}
		for tn, m := range methods {
			if m["name"] && m["apply"] && declares(f, tn) && !regTypes[tn] {
				out = append(out, fmt.Sprintf("%s: type %s is a %s no init of its file registers", fset.Position(f.Package), tn, r.elem))
			}
		}
	}
	return out
}

func recvType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// declares reports whether f declares a package-level function or type
// named n.
func declares(f *ast.File, n string) bool {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == n {
				return true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == n {
					return true
				}
			}
		}
	}
	return false
}

// renderRegistrations is the page's list of registrations.
func renderRegistrations(b *strings.Builder) {
	b.WriteString("\nHow each plugin kind registers (`TestRegistration`; test files aside):\n\n")
	for _, r := range registrations {
		call := "`" + r.call + "(...)`"
		if r.call == "register" {
			call = "`" + r.pkg + "`'s `register(" + r.elem + ")`"
		}
		switch r.impl {
		case "run":
			fmt.Fprintf(b, "- a %s: %s from a `func init` of the file declaring its `%s` function; no other `%s` literal, no list of them\n", r.kind, call, r.impl, r.elem)
		case "type":
			fmt.Fprintf(b, "- a %s: %s from a `func init` of the file declaring its type (a type with methods `name` and `apply`); each such type registered, no list of them\n", r.kind, call)
		default:
			fmt.Fprintf(b, "- a %s: %s from a `func init`\n", r.kind, call)
		}
	}
}
