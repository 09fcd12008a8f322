package archtest

import (
	"go/ast"
	"strings"
	"testing"
)

// runtimeOwners are the packages allowed to reach a descriptor behind Go's
// runtime: versus/floor, the bytes-only relay on an epoll loop of its own
// (it duplicates each accepted socket's descriptor and owns the copy), and
// safefile, which reads the descriptor of an *os.File it holds open (not a
// network connection).
var runtimeOwners = map[string]string{
	"internal/versus/floor": "a relay on its own epoll loop: dups each socket's descriptor and owns the copy",
	"internal/safefile":     "fstat of a file it holds open (os.File, not a connection)",
}

// runtimeCalls are the selectors that reach a descriptor the runtime owns
// (SyscallConn, RawConn.Control/Read/Write) or edit the runtime poller's
// kind of state (EpollCtl, EpollCreate1).
var runtimeCalls = map[string]bool{
	"SyscallConn": true, "Control": true, "EpollCtl": true, "EpollCreate1": true, "EpollWait": true,
}

// TestRuntimeState: outside runtimeOwners, no non-test file calls
// SyscallConn, a RawConn's Control, or epoll: connections are read and
// written with their own Read and Write, and no package edits state the
// Go runtime owns (its poller's registrations, its descriptors).
func TestRuntimeState(t *testing.T) {
	pkgs, fset := load(t, root(t))
	for _, pkg := range sortedKeys(pkgs) {
		if _, ok := runtimeOwners[pkg]; ok {
			continue
		}
		for _, name := range sortedKeys(pkgs[pkg].files) {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			ast.Inspect(pkgs[pkg].files[name], func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && runtimeCalls[sel.Sel.Name] {
					t.Errorf("%s: %s calls %s: read and write connections with their own Read and Write (docs/architecture.md, rule 6)", fset.Position(call.Pos()), pkg, sel.Sel.Name)
				}
				return true
			})
		}
	}
	for pkg := range runtimeOwners {
		if _, ok := pkgs[pkg]; !ok {
			t.Errorf("runtimeOwners names %s, which is not a package of the module", pkg)
		}
	}
}
