package proxy

import (
	"reflect"
	"testing"
)

func TestScanWordsAndContext(t *testing.T) {
	for s, want := range map[string]words{
		"SET search_path = s2, public":                                {context: true},
		"select * from t where a=1 or a in (select 1)":                {match: true},
		"SELECT set_config('search_path', 'x', false)":                {context: true},
		"UPDATE t SET a = 1 WHERE a = 2":                              {},
		"INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING":             {},
		"CREATE TEMP TABLE x (a int)":                                 {context: true},
		"SELECT 1 FROM t WHERE a = 1 OR a IN (SELECT 2); DISCARD ALL": {match: true, context: true},
		// Constants only: not a candidate, whatever the literals.
		"SELECT a FROM t WHERE a IN (4242, 4243) OR a = -1":    {},
		"SELECT a FROM t WHERE a = ANY ('{1,2}') OR b IN ($1)": {},
		"SELECT a FROM t WHERE a IN (select_list()) OR b = 1":  {},
		// Subquery forms, any case and spacing, nested parentheses.
		"select a from t where a=1 or a in(\n\t( SELECT 1))":                {match: true},
		"SELECT a FROM t WHERE a = SOME (VALUES (1)) OR b = 1":              {match: true},
		"SELECT a FROM t WHERE a = any (with c AS (SELECT 1) TABLE c) OR b": {match: true},
		"UPDATE t SET a = 1 WHERE a = 2 OR a IN (TABLE u)":                  {match: true},
		// A comment before the subquery: parsed to be sure.
		"SELECT a FROM t WHERE a IN /* c */ (SELECT 1) OR b = 1": {match: true},
		"SELECT a FROM t WHERE a IN ( -- c\n SELECT 1) OR b = 1": {match: true},
		// No OR: no candidate.
		"SELECT a FROM t WHERE a IN (SELECT 1)": {},
		// DO where a statement may start, CALL anywhere; not the DO of
		// an upsert.
		"DO $$ BEGIN PERFORM f(); END $$": {context: true},
		"select 1; do $x$ begin end $x$":  {context: true},
		"/* a */ DO 'begin end'":          {context: true},
		"-- a comment\n do 'begin end'":   {context: true},
		"CALL p(1)":                       {context: true},
		"INSERT INTO t VALUES (1) ON CONFLICT (a) DO UPDATE SET b = 2": {},
	} {
		if got := scanWords(s); got.match != want.match || got.context != want.context {
			t.Errorf("scanWords(%q) = %+v, want %+v", s, got, want)
		}
	}
	// calls: a word before an opening parenthesis.
	for s, want := range map[string]bool{
		"select f_alter()":                      true,
		"SELECT s.\"F_Alter\" ( 1 )":            true,
		"SELECT abalance FROM a WHERE aid = $1": false,
		"SELECT 1 FROM t WHERE a IN (1, 2)":     true, // IN ( errs towards a call
		"SELECT '(' || x FROM t":                false,
	} {
		if got := scanWords(s).calls; got != want {
			t.Errorf("scanWords(%q).calls = %v, want %v", s, got, want)
		}
	}
	m := &mutators{names: map[string]struct{}{"f_alter": {}}}
	for s, want := range map[string]bool{
		"select f_alter()":                   true,
		"SELECT public.F_ALTER ()":           true,
		`SELECT "f_alter"(1)`:                true,
		"SELECT f_alter2(), count(*) FROM t": false,
		"SELECT f_alter FROM t":              false,
	} {
		if got := m.calledIn([]byte(s)); got != want {
			t.Errorf("calledIn(%q) = %v, want %v", s, got, want)
		}
	}
	if !(&mutators{all: true}).calledIn([]byte("SELECT count(*) FROM t")) {
		t.Error("an unknown list: a call is not taken as a schema change")
	}
	cases := []struct {
		text  string
		alone bool
		want  contextChange
	}{
		{"SET search_path = s2, public", true, contextChange{setPath: "SET search_path = s2, public"}},
		{"SET search_path = s2, public", false, contextChange{unknown: true}},
		{"SET LOCAL search_path = s2", true, contextChange{unknown: true}},
		{"BEGIN; SET search_path = s2", true, contextChange{unknown: true}},
		{"RESET search_path", true, contextChange{toDefault: true}},
		{"SET search_path TO DEFAULT", true, contextChange{toDefault: true}},
		{"SET ROLE other", true, contextChange{unknown: true}},
		{"SET SESSION AUTHORIZATION other", true, contextChange{unknown: true}},
		{"RESET ALL", true, contextChange{reset: true}},
		{"DISCARD ALL", true, contextChange{reset: true}},
		{"DISCARD TEMP", true, contextChange{}},
		{"SELECT set_config('search_path', 'x', false)", true, contextChange{unknown: true}},
		{"CREATE TEMP TABLE x (a int)", true, contextChange{names: []string{"x"}}},
		{"SELECT 1 INTO TEMP x", true, contextChange{names: []string{"x"}}},
		{"CREATE TEMPORARY TABLE y AS SELECT 1", true, contextChange{names: []string{"y"}}},
		{"DROP TABLE tt1, s.tt2", true, contextChange{names: []string{"tt1", "tt2"}}},
		{"CREATE INDEX ON tt1 (a); DROP INDEX i", true, contextChange{}},
		{"CREATE TABLE p (a int)", true, contextChange{ddl: true}},
		{"DROP TYPE comp", true, contextChange{ddl: true}},
		{"ALTER TABLE t ALTER a TYPE int[]", false, contextChange{ddl: true}},
		{"UPDATE t SET a = 1 WHERE role = 2", true, contextChange{}},
		{"SET statement_timeout = 1", true, contextChange{}},
		{"SELEC nonsense", true, contextChange{}},
		{"DO $$ BEGIN PERFORM f_alter(); END $$", true, contextChange{ddl: true}},
		{"CALL p(1)", true, contextChange{ddl: true}},
	}
	for _, c := range cases {
		if got := classifyContext(c.text, c.alone, nil); !reflect.DeepEqual(got, c.want) {
			t.Errorf("classifyContext(%q, %v) = %+v, want %+v", c.text, c.alone, got, c.want)
		}
	}
	for text, want := range map[string]contextChange{
		"SELECT f_alter()": {ddl: true},
		"SELECT count(*) FROM t WHERE a = F_Alter(b)":        {ddl: true},
		"SELECT count(*), f_safe() FROM t":                   {},
		"SELECT set_config('search_path', f_alter(), false)": {ddl: true, unknown: true},
	} {
		if got := classifyContext(text, true, m); !reflect.DeepEqual(got, want) {
			t.Errorf("classifyContext(%q, true, f_alter) = %+v, want %+v", text, got, want)
		}
	}
	for _, c := range []struct {
		params  map[string]string
		path    string
		unknown bool
	}{
		{map[string]string{"user": "u"}, "", false},
		{map[string]string{"search_path": "a,b"}, "cfg:a,b", false},
		{map[string]string{"options": "-c search_path=s2,public"}, "cfg:s2,public", false},
		{map[string]string{"options": `-csearch_path=a\ b --work_mem=4MB`}, "cfg:a b", false},
		{map[string]string{"options": "--search-path=x"}, "cfg:x", false},
		{map[string]string{"options": "-c role=admin"}, "", true},
		{map[string]string{"role": "admin"}, "", true},
	} {
		path, unknown := startupPath(c.params)
		if path != c.path || unknown != c.unknown {
			t.Errorf("startupPath(%v) = %q, %v; want %q, %v", c.params, path, unknown, c.path, c.unknown)
		}
	}
}
