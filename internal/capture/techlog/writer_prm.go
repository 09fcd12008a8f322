package techlog

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/erplab/erplab/internal/capture"
)

// statement returns the SQL of statement e (a named KindExecute takes
// it from its KindPrepare) and its Prm text: one "\np_<n>: <literal>"
// per value, "" without values.
func (w *Writer) statement(e capture.Event) (string, string, error) {
	sql, names, oids := e.SQL, e.TypeNames, e.ParamOIDs
	// The statement's Prepare: by name, or the session's last unnamed
	// one of the same text (an unnamed Parse+Bind+Execute, as pgx sends).
	if p, ok := w.prepared[[2]string{e.Session, e.Name}]; e.Kind == capture.KindExecute && ok && (e.Name != "" || p.SQL == e.SQL) {
		sql = cmpOr(sql, p.SQL)
		if names == nil {
			names = p.TypeNames
		}
		if oids == nil {
			oids = p.ParamOIDs
		}
		oids = withServerOIDs(oids, p.ServerParamOIDs)
	}
	if strings.TrimSpace(sql) == "" {
		return "", "", fmt.Errorf("session %s, t %d µs: a %s without SQL (prepared statement %q not seen)", e.Session, e.T, e.Kind, e.Name)
	}
	if e.Kind != capture.KindExecute || len(e.Values) == 0 {
		return sql, "", nil
	}
	var b strings.Builder
	for i, v := range e.Values {
		lit, err := w.literal(e, i, v, names, oids)
		if err != nil {
			return "", "", fmt.Errorf("session %s, t %d µs: parameter $%d: %w", e.Session, e.T, i+1, err)
		}
		fmt.Fprintf(&b, "\np_%d: %s", i+1, lit)
	}
	return sql, b.String(), nil
}

// cmpOr is a when not empty, else b.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// literal is value i of e as Prm writes it, with its type: the type
// name given, else the name of its OID.
func (w *Writer) literal(e capture.Event, i int, v []byte, names []string, oids []uint32) (string, error) {
	var typ string
	var oid uint32
	if i < len(names) {
		typ = names[i]
	}
	if i < len(oids) {
		oid = oids[i]
	}
	if t, ok := w.types.TypeForOID(oid); typ == "" && oid != 0 && ok {
		typ = t.Name
	}
	if v != nil && formatOf(e.Formats, i) == pgtype.BinaryFormatCode {
		text, err := w.binaryText(oid, v)
		if err != nil {
			return "", err
		}
		v = text
	}
	return prmText(v, typ), nil
}

// formatOf is value i's format code as Bind gives them: none means all
// text, one applies to all.
func formatOf(formats []int16, i int) int16 {
	switch {
	case len(formats) == 0:
		return pgtype.TextFormatCode
	case len(formats) == 1:
		return formats[0]
	case i < len(formats):
		return formats[i]
	}
	return pgtype.TextFormatCode
}

// binaryText is the text form of binary value v of type oid.
func (w *Writer) binaryText(oid uint32, v []byte) ([]byte, error) {
	t, ok := w.types.TypeForOID(oid)
	if oid == 0 || !ok {
		return nil, fmt.Errorf("binary value of unknown type (OID %d): the journal holds values as text", oid)
	}
	val, err := t.Codec.DecodeValue(w.types, oid, pgtype.BinaryFormatCode, v)
	if err != nil {
		return nil, fmt.Errorf("binary %s value: %w", t.Name, err)
	}
	text, err := w.types.Encode(oid, pgtype.TextFormatCode, val, nil)
	if err != nil {
		return nil, fmt.Errorf("%s value as text: %w", t.Name, err)
	}
	return text, nil
}

// prmText writes a value as parsePrm reads it: NULL, a bare token (an
// untyped word of letters, digits, '.', '+', '-'), or a quoted string
// with ' doubled and \ doubled (standard_conforming_strings off), then
// "::type" when typ is set.
func prmText(v []byte, typ string) string {
	var s string
	switch {
	case v == nil:
		s = "NULL"
	case typ == "" && bareToken(v):
		s = string(v)
	default:
		s = quoteLiteral(v)
	}
	if typ != "" {
		s += "::" + typ
	}
	return s
}

// quoteLiteral is v in quotes with ' and \ doubled.
func quoteLiteral(v []byte) string {
	var b strings.Builder
	b.Grow(len(v) + 2)
	b.WriteByte('\'')
	for _, c := range v {
		if c == '\'' || c == '\\' {
			b.WriteByte(c)
		}
		b.WriteByte(c)
	}
	b.WriteByte('\'')
	return b.String()
}

// bareToken reports whether v can be written without quotes.
func bareToken(v []byte) bool {
	if len(v) == 0 || strings.EqualFold(string(v), "NULL") {
		return false
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '.' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}

// withServerOIDs fills the types a Parse left to the server (OID 0, or
// none declared) with those the server reported (ServerParamOIDs): the
// types binary values are in.
func withServerOIDs(oids, server []uint32) []uint32 {
	if len(server) == 0 {
		return oids
	}
	out := make([]uint32, max(len(oids), len(server)))
	copy(out, oids)
	for i := range out {
		if out[i] == 0 && i < len(server) {
			out[i] = server[i]
		}
	}
	return out
}
