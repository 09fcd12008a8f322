package techlog

import (
	"fmt"
	"sort"
	"strings"
)

// DefaultTypeMap returns the types of 1C's PostgreSQL builds that a stock
// server lacks, each with the stock type a replay binds instead:
//
//	mvarchar -> varchar  (1C's case-insensitive varying string, contrib mchar)
//	mchar    -> bpchar   (1C's case-insensitive fixed string, contrib mchar)
//
// bpchar is the catalog name of character(n): written as a type name
// without a length it keeps the value whole, where "char" would mean
// character(1) in a cast. The mapping changes comparison semantics (the
// 1C types compare case-insensitively), not the values. A typmod and an
// array suffix are kept: mvarchar(150)[] -> varchar(150)[].
func DefaultTypeMap() map[string]string {
	return map[string]string{"mvarchar": "varchar", "mchar": "bpchar"}
}

// ParseTypeMap reads overrides of DefaultTypeMap as a command line gives
// them: each spec is "from=to" or several joined by commas
// ("mvarchar=text,mchar=bpchar"); "from=" keeps from unmapped. The
// error names the spec that does not parse.
func ParseTypeMap(specs ...string) (map[string]string, error) {
	m := map[string]string{}
	for _, spec := range specs {
		for _, item := range strings.Split(spec, ",") {
			from, to, ok := strings.Cut(strings.TrimSpace(item), "=")
			from, to = strings.ToLower(strings.TrimSpace(from)), strings.TrimSpace(to)
			if !ok || from == "" || strings.ContainsAny(from+to, " \t'\"();") {
				return nil, fmt.Errorf("type map %q: from=to expected (e.g. mvarchar=text)", item)
			}
			m[from] = to
		}
	}
	return m, nil
}

// typeMap is DefaultTypeMap with overrides applied (a "" target drops
// the entry), counting the parameters each entry mapped.
type typeMap struct {
	to   map[string]string
	used map[string]int
}

func newTypeMap(overrides map[string]string) *typeMap {
	t := &typeMap{to: DefaultTypeMap(), used: map[string]int{}}
	for from, to := range overrides {
		if from = strings.ToLower(from); to == "" {
			delete(t.to, from)
		} else {
			t.to[from] = to
		}
	}
	return t
}

// apply maps typ (as written after "::": maybe schema-qualified, with a
// typmod or array suffix) and counts the use when count is set.
func (t *typeMap) apply(typ string, count bool) string {
	cut := strings.IndexAny(typ, "([ ")
	if cut < 0 {
		cut = len(typ)
	}
	base := strings.ToLower(typ[:cut])
	if dot := strings.LastIndexByte(base, '.'); dot >= 0 {
		base = base[dot+1:]
	}
	to, ok := t.to[strings.Trim(base, `"`)]
	if !ok {
		return typ
	}
	if count {
		t.used[strings.Trim(base, `"`)]++
	}
	return to + typ[cut:]
}

// TypeMapping is one entry of the type map that the journal used: From
// mapped to To in Params parameters.
type TypeMapping struct {
	From, To string
	Params   int
}

// mappings lists the entries used, by From.
func (t *typeMap) mappings() []TypeMapping {
	var ms []TypeMapping
	for from, n := range t.used {
		ms = append(ms, TypeMapping{From: from, To: t.to[from], Params: n})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].From < ms[j].From })
	return ms
}
