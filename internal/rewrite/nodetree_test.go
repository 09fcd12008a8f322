package rewrite

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The trees of testdata/trees are pg_rewrite.ev_action of PostgreSQL 15
// for CREATE TEMP VIEW erplab_guard AS
//
//	division: SELECT 1/(x-x) FROM s
//	escapes:  SELECT "x :funcid 9".x AS "a b(c){d}\e :funcid 3" FROM s AS "x :funcid 9"
//	          WHERE "x :funcid 9".y = ' :funcid 7 ) {' ORDER BY 1 DESC
//	folded:   SELECT x FROM s WHERE x::float8 >= 2.5 AND y IN ('a', 'b') GROUP BY x
//
// with s (x int, y text).
func readTree(t *testing.T, name string) (string, any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "trees", name+".tree"))
	if err != nil {
		t.Fatal(err)
	}
	raw := strings.TrimSpace(string(b))
	tree, err := parseTree(raw)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return raw, tree
}

// selfOf is the OID of the view a recorded tree is the query of: its
// first range table entry (OLD) reads the view itself.
func selfOf(tree any) uint32 {
	q := tree.(ptList).items[0].(*ptNode)
	return oidOf(q.get("rtable").(ptList).items[0].(*ptNode).str("relid"))
}

// TestParseTree: the OIDs the guard asks about are those the server
// wrote, escaped names (which may look like fields) included, and every
// truncation of a tree is an error, never a panic.
func TestParseTree(t *testing.T) {
	for name, want := range map[string]ptOIDs{
		"division": {funcs: []uint32{154, 181}, ops: []uint32{528, 555}},
		"escapes":  {funcs: []uint32{67}, ops: []uint32{98, 96, 521}},
		"folded":   {funcs: []uint32{298, 316, 1746, 67}, ops: []uint32{675, 98, 96, 97}},
	} {
		_, tree := readTree(t, name)
		var got ptOIDs
		got.collect(tree, selfOf(tree))
		slices.Sort(got.funcs)
		slices.Sort(got.ops)
		slices.Sort(want.funcs)
		slices.Sort(want.ops)
		got.funcs, got.ops = slices.Compact(got.funcs), slices.Compact(got.ops)
		if !slices.Equal(got.funcs, want.funcs) || !slices.Equal(got.ops, want.ops) || len(got.views) != 0 {
			t.Errorf("%s: functions %v operators %v views %v, want %v %v", name, got.funcs, got.ops, got.views, want.funcs, want.ops)
		}
	}
	// The escaped names read back as written.
	_, tree := readTree(t, "escapes")
	q := tree.(ptList).items[0].(*ptNode)
	rte := q.get("rtable").(ptList).items[2].(*ptNode)
	if a := rte.get("alias").(*ptNode).str("aliasname"); a != "x :funcid 9" {
		t.Errorf("alias %q", a)
	}
	te := q.get("targetList").(ptList).items[0].(*ptNode)
	if r := te.str("resname"); r != `a b(c){d}\e :funcid 3` {
		t.Errorf("resname %q", r)
	}
	raw, _ := readTree(t, "division")
	for i := range len(raw) {
		if _, err := parseTree(raw[:i]); err == nil {
			t.Fatalf("the first %d bytes parse", i)
		}
	}
	for _, bad := range []string{"", "}", "{}", "{QUERY :a {X :b (}", "(i 1 2", "{QUERY :a 4 [ 1 2", strings.Repeat("(", maxTreeDepth+10)} {
		if _, err := parseTree(bad); err == nil {
			t.Errorf("%q parses", bad)
		}
	}
}

// TestGuardWalk judges recorded trees against facts: a function that is
// not leakproof vetoes, unless it is immutable and all its arguments are
// constants (the planner folds it for both forms).
func TestGuardWalk(t *testing.T) {
	facts := func(notLeakproof ...uint32) *Resolution {
		r := &Resolution{Funcs: map[uint32]Routine{}, Ops: map[uint32]Operator{}}
		for f, name := range map[uint32]string{154: "int4div", 181: "int4mi", 67: "texteq", 65: "int4eq", 66: "int4lt",
			147: "int4gt", 298: "float8ge", 316: "float8", 1746: "float8"} {
			r.Funcs[f] = Routine{Name: name, Volatility: 'i', Leakproof: !slices.Contains(notLeakproof, f)}
		}
		for op, o := range map[uint32]Operator{528: {"/", 154}, 555: {"-", 181}, 98: {"=", 67}, 96: {"=", 65}, 97: {"<", 66},
			521: {">", 147}, 675: {">=", 298}} {
			r.Ops[op] = o
		}
		return r
	}
	for _, c := range []struct {
		tree string
		not  []uint32
		want string
	}{
		{"division", nil, ""},
		{"division", []uint32{154}, "the subquery calls int4div (operator /, not leakproof): evaluating it where the original did not could raise an error"},
		{"division", []uint32{154, 181}, "the subquery calls int4mi (operator -, not leakproof)"},
		{"folded", []uint32{1746}, ""}, // float8(2.5): folded
		{"folded", []uint32{316}, "the subquery calls float8 (not leakproof)"},
		{"escapes", nil, ""},
		{"escapes", []uint32{147}, "calls int4gt (operator >, not leakproof)"}, // ORDER BY 1 DESC's >
	} {
		_, tree := readTree(t, c.tree)
		g := &guardWalk{res: facts(c.not...), trees: map[uint32]any{0: tree}}
		g.visit(tree, treeFrom{self: selfOf(tree)})
		if c.want == "" && g.why != "" || !strings.Contains(g.why, c.want) {
			t.Errorf("%s, not leakproof %v: %q, want %q", c.tree, c.not, g.why, c.want)
		}
	}
	// A function the facts lack vetoes.
	_, tree := readTree(t, "division")
	g := &guardWalk{res: &Resolution{}, trees: map[uint32]any{0: tree}}
	g.visit(tree, treeFrom{self: selfOf(tree)})
	if !strings.Contains(g.why, "which the catalog does not know") {
		t.Errorf("without facts: %q", g.why)
	}
}
