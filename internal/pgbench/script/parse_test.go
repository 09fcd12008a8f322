package script

import (
	"errors"
	"strings"
	"testing"
)

func mustParse(t *testing.T, src string) *Script {
	t.Helper()
	s, err := Parse("t.sql", src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return s
}

func TestParseCommands(t *testing.T) {
	type want struct {
		meta  Meta
		line  int
		text  string // SQL Text, or meta FirstLine
		gset  bool
		aset  bool
		prefx string
	}
	tests := []struct {
		name string
		src  string
		want []want
	}{
		{"sql over lines, leading comments dropped",
			"-- header\n\n  SELECT 1\n  + 1;\nSELECT 2;",
			[]want{{meta: SQL, line: 3, text: "SELECT 1\n  + 1;"}, {meta: SQL, line: 5, text: "SELECT 2;"}}},
		{"last command without semicolon",
			"SELECT 1;\nSELECT 2\n",
			[]want{{meta: SQL, line: 1, text: "SELECT 1;"}, {meta: SQL, line: 2, text: "SELECT 2\n"}}},
		{"comments inside a command are kept (PostgreSQL 15 psql)",
			"SELECT 1 -- one; two\n, 2 /* ; */;",
			[]want{{meta: SQL, line: 1, text: "SELECT 1 -- one; two\n, 2 /* ; */;"}}},
		{"nested block comment",
			"SELECT /* a /* b; */ c; */ 1;",
			[]want{{meta: SQL, line: 1, text: "SELECT /* a /* b; */ c; */ 1;"}}},
		{"quotes hide semicolons and backslashes",
			`SELECT 'a;b', 'it''s', E'x\';\\', "we;ird""id", $$ ; \set $$, $tag$ $$ ; $tag$, B'0;1';`,
			[]want{{meta: SQL, line: 1, text: `SELECT 'a;b', 'it''s', E'x\';\\', "we;ird""id", $$ ; \set $$, $tag$ $$ ; $tag$, B'0;1';`}}},
		{"string continued over a newline",
			"SELECT 'a'\n  'b;c';",
			[]want{{meta: SQL, line: 1, text: "SELECT 'a'\n  'b;c';"}}},
		{"parentheses hide semicolons",
			"SELECT (1;\n2);\nSELECT 3;",
			[]want{{meta: SQL, line: 1, text: "SELECT (1;\n2);"}, {meta: SQL, line: 3, text: "SELECT 3;"}}},
		{"BEGIN ATOMIC body",
			"CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2; END;\nSELECT f();",
			[]want{{meta: SQL, line: 1, text: "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2; END;"},
				{meta: SQL, line: 2, text: "SELECT f();"}}},
		{"BEGIN transaction is not a body",
			"BEGIN;\nSELECT 1;\nEND;",
			[]want{{meta: SQL, text: "BEGIN;", line: 1}, {meta: SQL, text: "SELECT 1;", line: 2}, {meta: SQL, text: "END;", line: 3}}},
		{"backslash-semicolon joins queries",
			`SELECT 1 \; SELECT 2;`,
			[]want{{meta: SQL, line: 1, text: "SELECT 1 ; SELECT 2;"}}},
		{"gset on the same line, with prefix",
			"SELECT 1 AS a \\gset p_\n",
			[]want{{meta: SQL, line: 1, text: "SELECT 1 AS a ", gset: true, prefx: "p_"}}},
		{"gset on the next line",
			"SELECT 1 AS a;\n\\gset\n",
			[]want{{meta: SQL, line: 1, text: "SELECT 1 AS a;", gset: true}}},
		{"aset",
			"\\; SELECT 6 AS i6 \\; SELECT 7 AS i7 \\; \\aset\n",
			[]want{{meta: SQL, line: 1, text: "; SELECT 6 AS i6 ; SELECT 7 AS i7 ; ", aset: true}}},
		{"meta-commands",
			"\\set a 1\n\\sleep 10 ms\n\\sleep :a\n\\shell echo x\n\\setshell v echo 1\n\\startpipeline\n\\syncpipeline\n\\endpipeline\n",
			[]want{{meta: Set, line: 1, text: `\set a 1`}, {meta: Sleep, line: 2, text: `\sleep 10 ms`},
				{meta: Sleep, line: 3, text: `\sleep :a`}, {meta: Shell, line: 4, text: `\shell echo x`},
				{meta: SetShell, line: 5, text: `\setshell v echo 1`}, {meta: StartPipeline, line: 6, text: `\startpipeline`},
				{meta: SyncPipeline, line: 7, text: `\syncpipeline`}, {meta: EndPipeline, line: 8, text: `\endpipeline`}}},
		{"meta-command names are case-insensitive",
			"\\SET a 1\n\\Sleep 1\n",
			[]want{{meta: Set, line: 1, text: `\SET a 1`}, {meta: Sleep, line: 2, text: `\Sleep 1`}}},
		{"continuation lines",
			"\\setshell another_one\\\n  echo \\\n    :one\n\\set x 1 + \\\n  2\nSELECT 1;",
			[]want{{meta: SetShell, line: 1, text: "\\setshell another_one\\\n  echo \\\n    :one"},
				{meta: Set, line: 4, text: "\\set x 1 + \\\n  2"}, {meta: SQL, line: 6, text: "SELECT 1;"}}},
		{"if elif else endif",
			"\\if :a\n\\elif :b\n\\else\n\\endif\n",
			[]want{{meta: If, line: 1, text: `\if :a`}, {meta: Elif, line: 2, text: `\elif :b`}, {meta: Else, line: 3, text: `\else`}, {meta: Endif, line: 4, text: `\endif`}}},
		{"sql ended by a meta-command",
			"SELECT 1\n\\set a 2\n",
			[]want{{meta: SQL, line: 1, text: "SELECT 1\n"}, {meta: Set, line: 2, text: `\set a 2`}}},
		{"windows line ends",
			"SELECT 1;\r\n\\set a 2\r\n",
			[]want{{meta: SQL, line: 1, text: "SELECT 1;"}, {meta: Set, line: 2, text: `\set a 2`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.src)
			if len(s.Commands) != len(tt.want) {
				for _, c := range s.Commands {
					t.Logf("%v %q", c.Meta, c.Text+c.FirstLine)
				}
				t.Fatalf("got %d commands, want %d", len(s.Commands), len(tt.want))
			}
			for i, w := range tt.want {
				c := s.Commands[i]
				got := c.FirstLine
				if c.Meta == SQL {
					got = c.Text
				}
				if c.Meta != w.meta || c.Line != w.line || got != w.text || c.Gset != w.gset || c.Aset != w.aset || c.Prefix != w.prefx {
					t.Errorf("command %d = {%v line %d %q gset=%v aset=%v prefix=%q}, want {%v line %d %q gset=%v aset=%v prefix=%q}",
						i, c.Meta, c.Line, got, c.Gset, c.Aset, c.Prefix, w.meta, w.line, w.text, w.gset, w.aset, w.prefx)
				}
			}
		})
	}
}

func TestParseFirstLine(t *testing.T) {
	long := "SELECT " + strings.Repeat("x", 200) + ";"
	s := mustParse(t, "SELECT 1\n  + 1;\n"+long+"\n")
	if got := s.Commands[0].FirstLine; got != "SELECT 1" {
		t.Errorf("FirstLine = %q, want %q", got, "SELECT 1")
	}
	if got := s.Commands[1].FirstLine; len(got) != 127 {
		t.Errorf("long FirstLine has %d bytes, want 127", len(got))
	}
}

func TestParseVariableReferences(t *testing.T) {
	tests := []struct {
		src      string
		names    []string
		paramSQL string
	}{
		{"SELECT :a, :b_2, :a;", []string{"a", "b_2", "a"}, "SELECT $1, $2, $3;"},
		// pgbench substitutes everywhere, also inside quotes and comments
		{"SELECT ':a' -- :b\n;", []string{"a", "b"}, "SELECT '$1' -- $2\n;"},
		// casts and runs of colons are not references
		{"SELECT x::int, :c::text, :::d, a[1:2];", []string{"c"}, "SELECT x::int, $1::text, :::d, a[1:2];"},
		// a name cannot start with a digit
		{"SELECT :1a, :_x;", []string{"_x"}, "SELECT :1a, $1;"},
		// psql-style :'v' is not a pgbench reference
		{"SELECT :'v';", nil, "SELECT :'v';"},
	}
	for _, tt := range tests {
		s := mustParse(t, tt.src)
		c := s.Commands[0]
		var names []string
		for _, r := range c.refs {
			names = append(names, s.vars[r.slot])
			if c.Text[r.off] != ':' || c.Text[r.off+1:r.end] != s.vars[r.slot] {
				t.Errorf("%q: ref %q at [%d,%d) does not match the text", tt.src, s.vars[r.slot], r.off, r.end)
			}
		}
		if strings.Join(names, ",") != strings.Join(tt.names, ",") {
			t.Errorf("%q: refs %v, want %v", tt.src, names, tt.names)
		}
		if c.paramSQL != tt.paramSQL {
			t.Errorf("%q: paramSQL %q, want %q", tt.src, c.paramSQL, tt.paramSQL)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // full Error() text
	}{
		{"invalid command", "SELECT 1;\n  \\nosuchcommand x", `t.sql:2:3: invalid command in command "nosuchcommand"`},
		{"set missing argument", `\set`, `t.sql:1:1: missing argument in command "set"`},
		{"sleep missing argument", `\sleep`, `t.sql:1:1: missing argument in command "sleep"`},
		{"sleep too many arguments", `\sleep too many args`, `t.sql:1:17: too many arguments in command "sleep"`},
		{"sleep unknown unit", `\sleep 1 week`, `t.sql:1:10: unrecognized time unit, must be us, ms or s (week) in command "sleep"`},
		{"sleep glued unknown unit", `\sleep 5min`, `t.sql:1:9: unrecognized time unit, must be us, ms or s (min) in command "sleep"`},
		{"sleep not a number", `\sleep abc`, `t.sql:1:8: invalid sleep time, must be an integer (abc) in command "sleep"`},
		{"sleep unit on a continued line", "\\sleep 1 \\\n  week", `t.sql:2:3: unrecognized time unit, must be us, ms or s (week) in command "sleep"`},
		{"shell missing command", `\shell`, `t.sql:1:1: missing command in command "shell"`},
		{"setshell missing argument", `\setshell var`, `t.sql:1:1: missing argument in command "setshell"`},
		{"shell too many arguments", `\shell echo ` + strings.Repeat("arg ", 255), `t.sql:1:1029: too many arguments in command "shell"`},
		{"else argument", "\\if 0\n\\else BAD\n\\endif", `t.sql:2:7: unexpected argument in command "else"`},
		{"endif argument", "\\if 0\n\\endif BAD", `t.sql:2:8: unexpected argument in command "endif"`},
		{"startpipeline argument", `\startpipeline now`, `t.sql:1:16: unexpected argument in command "startpipeline"`},
		{"gset alone", `\gset`, `t.sql:1:1: \gset must follow an SQL command`},
		{"gset after meta", "\\set i 1\n\\gset", `t.sql:2:1: \gset must follow an SQL command (\set i 1)`},
		{"gset after gset", "SELECT 1 AS i \\gset\n\\gset", `t.sql:2:1: \gset must follow an SQL command (SELECT 1 AS i )`},
		{"gset too many arguments", `SELECT 1 \gset a b`, `t.sql:1:18: too many arguments in command "gset"`},
		{"aset after meta", "\\sleep 1\n\\aset", `t.sql:2:1: \gset must follow an SQL command (\sleep 1)`},
		{"missing endif", "SELECT 1;\n\\if 1\n\\if 2\n\\endif", `t.sql:2:1: \if without matching \endif`},
		{"elif without if", "\\elif 1", `t.sql:1:1: \elif without matching \if`},
		{"else without if", `\else`, `t.sql:1:1: \else without matching \if`},
		{"endif without if", "SELECT 1;\n\\endif", `t.sql:2:1: \endif without matching \if`},
		{"elif after else", "\\if 1\n\\else\n\\elif 0\n\\endif", `t.sql:3:1: \elif after \else`},
		{"else after else", "\\if 1\n\\else\n\\else\n\\endif", `t.sql:3:1: \else after \else`},
		{"empty script", "", `t.sql:1:1: empty command list for script "t.sql"`},
		{"only comments", "-- nothing\n  \n", `t.sql:1:1: empty command list for script "t.sql"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.sql", tt.src)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error = %v, want *ParseError %q", err, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %q\nwant %q", err.Error(), tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error has several lines: %q", err.Error())
			}
		})
	}
}

// Expression syntax errors come from package expr; the column points into
// the file.
func TestParseExpressionErrors(t *testing.T) {
	tests := []struct {
		src      string
		line     int
		contains string
	}{
		{`\set i 1 +`, 1, `in command "set"`},
		{`\set i ;`, 1, `unexpected character`},
		{"\\if 1\n\\elif +\n\\endif", 2, `in command "elif"`},
		{"\\if\n\\endif", 1, `in command "if"`},
		{`\set i noSuchFunction()`, 1, `in command "set"`},
		{"\\set i 1 + \\\n  )", 2, `in command "set"`},
	}
	for _, tt := range tests {
		_, err := Parse("t.sql", tt.src)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: error %v, want a *ParseError", tt.src, err)
			continue
		}
		if pe.Line != tt.line || pe.Column < 1 || !strings.Contains(pe.Msg, tt.contains) {
			t.Errorf("%q: error %q, want line %d and %q", tt.src, err, tt.line, tt.contains)
		}
	}
}

func TestParseSleepArguments(t *testing.T) {
	tests := []struct {
		src    string
		us     int64
		unit   int64
		useVar bool
	}{
		{`\sleep 3`, 3, 1e6, false},
		{`\sleep 3 ms`, 3, 1000, false},
		{`\sleep 3MS`, 3, 1000, false},
		{`\sleep 250us`, 250, 1, false},
		{`\sleep -2 s`, -2, 1e6, false},
		{`\sleep :d us`, 0, 1, true},
	}
	for _, tt := range tests {
		c := mustParse(t, tt.src).Commands[0]
		if c.sleepUS != tt.us || c.sleepUnit != tt.unit || (c.sleepVar >= 0) != tt.useVar {
			t.Errorf("%q: us=%d unit=%d var=%d, want us=%d unit=%d var=%v", tt.src, c.sleepUS, c.sleepUnit, c.sleepVar, tt.us, tt.unit, tt.useVar)
		}
	}
}

func TestParseWeighted(t *testing.T) {
	tests := []struct {
		spec   string
		name   string
		weight int
		err    string
	}{
		{"a.sql", "a.sql", 1, ""},
		{"a.sql@5", "a.sql", 5, ""},
		{"x@y@0", "x@y", 0, ""},
		{"select-only@one", "", 0, "invalid weight specification: @one"},
		{"select-only@-1", "", 0, "weight specification out of range (0 .. 2147483647): -1"},
		{"s@99999999999999999999", "", 0, "weight specification out of range (0 .. 2147483647): 99999999999999999999"},
	}
	for _, tt := range tests {
		name, w, err := ParseWeighted(tt.spec)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ParseWeighted(%q) error %v, want %q", tt.spec, err, tt.err)
			}
			continue
		}
		if err != nil || name != tt.name || w != tt.weight {
			t.Errorf("ParseWeighted(%q) = %q, %d, %v; want %q, %d", tt.spec, name, w, err, tt.name, tt.weight)
		}
	}
}

func TestBuiltin(t *testing.T) {
	tests := []struct {
		spec   string
		name   string
		weight int
		ncmd   int
		err    string
	}{
		{"tpcb-like", "<builtin: TPC-B (sort of)>", 1, 11, ""},
		{"tpcb", "<builtin: TPC-B (sort of)>", 1, 11, ""},
		{"simple-update@3", "<builtin: simple update>", 3, 9, ""},
		{"select", "<builtin: select only>", 1, 2, ""},
		{"se@2", "<builtin: select only>", 2, 2, ""},
		{"s", "", 0, 0, `ambiguous builtin name: 2 builtin scripts found for prefix "s"`},
		{"no-such-builtin", "", 0, 0, `no builtin script found for name "no-such-builtin"`},
	}
	for _, tt := range tests {
		s, err := Builtin(tt.spec)
		if tt.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("Builtin(%q) error %v, want %q", tt.spec, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Builtin(%q): %v", tt.spec, err)
		}
		if s.Name != tt.name || s.Weight != tt.weight || len(s.Commands) != tt.ncmd {
			t.Errorf("Builtin(%q) = %q weight %d, %d commands; want %q %d %d", tt.spec, s.Name, s.Weight, len(s.Commands), tt.name, tt.weight, tt.ncmd)
		}
	}
	if got := strings.Join(BuiltinNames(), ","); got != "tpcb-like,simple-update,select-only" {
		t.Errorf("BuiltinNames = %s", got)
	}
	s, _ := Builtin("select-only")
	if got := s.Commands[1].Text; got != "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;" {
		t.Errorf("select-only SQL = %q", got)
	}
	if got := s.Commands[0].FirstLine; got != `\set aid random(1, 100000 * :scale)` {
		t.Errorf("select-only first command = %q", got)
	}
}
