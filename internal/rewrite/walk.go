package rewrite

import (
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Walk visits m and every message below it depth first, unwrapping
// pg_query.Node wrappers, so fn sees the concrete node types (*SelectStmt,
// *BoolExpr, *ColumnRef, ...); fn returns false to skip the node's
// children. It is the one walk of a pg_query tree that erplab's SQL
// analysis uses (the rewrite rules, the proxy, the doctor).
func Walk(m proto.Message, fn func(m proto.Message) bool) {
	walk(m, nil, func(m proto.Message, _ []proto.Message) bool { return fn(m) })
}

// walk visits m and every message below it depth first, unwrapping
// pg_query.Node wrappers, so fn sees the concrete node types (*SelectStmt,
// *BoolExpr, ...). stack holds the ancestors of the visited node,
// outermost first; fn must not keep it. fn returns false to skip the
// node's children.
func walk(m proto.Message, stack []proto.Message, fn func(m proto.Message, stack []proto.Message) bool) {
	if m == nil {
		return
	}
	if n, ok := m.(*pg_query.Node); ok {
		m = unwrap(n)
		if m == nil {
			return
		}
	}
	if !fn(m, stack) {
		return
	}
	stack = append(stack, m)
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || fd.IsMap() {
			return true
		}
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				walk(l.Get(i).Message().Interface(), stack, fn)
			}
			return true
		}
		walk(v.Message().Interface(), stack, fn)
		return true
	})
}

// unwrap returns the concrete message inside a Node, or nil.
func unwrap(n *pg_query.Node) proto.Message {
	if n == nil {
		return nil
	}
	r := n.ProtoReflect()
	fd := r.WhichOneof(r.Descriptor().Oneofs().Get(0))
	if fd == nil {
		return nil
	}
	return r.Get(fd).Message().Interface()
}

// nodeLocation returns the byte offset PostgreSQL's parser recorded for
// the expression n (its "location" field: an operator's position for
// A_Expr and SubLink, the start for most others), or fallback when n has
// none or it is unknown (-1).
func nodeLocation(n *pg_query.Node, fallback int) int {
	m := unwrap(n)
	if m == nil {
		return fallback
	}
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName("location")
	if fd == nil || fd.Kind() != protoreflect.Int32Kind {
		return fallback
	}
	if l := int(r.Get(fd).Int()); l >= 0 {
		return l
	}
	return fallback
}

// strs returns the String values of a name list (e.g. ColumnRef.Fields,
// FuncCall.Funcname); a non-String element (A_Star) gives "*".
func strs(ns []*pg_query.Node) []string {
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		switch v := n.GetNode().(type) {
		case *pg_query.Node_String_:
			out = append(out, v.String_.Sval)
		default:
			out = append(out, "*")
		}
	}
	return out
}
