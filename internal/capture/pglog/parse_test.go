package pglog

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseParams(t *testing.T) {
	cases := []struct {
		detail string
		want   []string // "<NULL>" for NULL
		err    string
	}{
		{"parameters: $1 = '2', $2 = NULL", []string{"2", "<NULL>"}, ""},
		{"parameters: $1 = '', $2 = 'O''Reilly', $3 = 'a, $2 = b'", []string{"", "O'Reilly", "a, $2 = b"}, ""},
		{"parameters: $1 = 'two\nlines'", []string{"two\nlines"}, ""},
		{"Key (id)=(1) already exists.", nil, ""},
		{"parameters: $1 = '1', $3 = '2'", nil, "no $2 where expected"},
		{"parameters: $1 = 'open", nil, "$1: a quoted value not closed"},
		{"parameters: $1 = 5", nil, "$1: neither NULL nor a quoted value"},
		{"parameters: $1 = '5' x", nil, "text after $1"},
	}
	for _, c := range cases {
		got, err := parseParams(c.detail)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.detail, err, c.err)
			}
			continue
		}
		var vals []string
		for _, v := range got {
			if v == nil {
				vals = append(vals, "<NULL>")
			} else {
				vals = append(vals, string(v))
			}
		}
		if err != nil || !reflect.DeepEqual(vals, c.want) {
			t.Errorf("%q: %q, %v, want %q", c.detail, vals, err, c.want)
		}
		if len(got) > 0 && c.want[0] == "" && got[0] == nil {
			t.Errorf("%q: the empty string became NULL", c.detail)
		}
	}
}

func TestParseMessage(t *testing.T) {
	cases := []struct {
		msg  string
		want message
	}{
		{"execute S_1/C_2: SELECT $1", message{kind: msgExecute, phase: "execute", name: "S_1", sql: "SELECT $1"}},
		{"execute fetch from S_1/C_2: SELECT 1", message{kind: msgExecute, phase: "execute", name: "S_1", fetch: true, sql: "SELECT 1"}},
		{"duration: 1.5 ms  bind <unnamed>/C_1: SELECT 1", message{kind: msgDuration, dur: 1500, phase: "bind", sql: "SELECT 1"}},
		{"duration: 0.004 ms", message{kind: msgDuration, dur: 4}},
		{"duration: 12.000 ms  statement: SELECT 'a: b'", message{kind: msgDuration, dur: 12000, phase: "statement", sql: "SELECT 'a: b'"}},
		{"checkpoint starting: time", message{kind: msgOther}},
	}
	for _, c := range cases {
		got, err := parseMessage(c.msg)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v, %v, want %+v", c.msg, got, err, c.want)
		}
	}
	for _, bad := range []string{"duration: x ms", "duration: 1.0 ms  vacuum: t", "execute S_1 SELECT 1"} {
		if _, err := parseMessage(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestAuthorized(t *testing.T) {
	got := authorized("user=app database=erp db application_name=1C:Enterprise 8.3 SSL enabled (protocol=TLSv1.3, cipher=TLS_AES_256_GCM_SHA384, bits=256)")
	want := map[string]string{"user": "app", "database": "erp db", "application_name": "1C:Enterprise 8.3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
	if got := authorized("user=u database=d"); !reflect.DeepEqual(got, map[string]string{"user": "u", "database": "d"}) {
		t.Errorf("without an application: %v", got)
	}
}

func TestZones(t *testing.T) {
	var warned []string
	z := zones{warn: func(f string, a ...any) { warned = append(warned, f) }}
	for _, c := range []struct{ in, want string }{
		{"2026-03-01 10:00:00.123 UTC", "2026-03-01T10:00:00.123Z"},
		{"2026-03-01 13:00:00.123 +03", "2026-03-01T10:00:00.123Z"},
		{"2026-03-01 04:30:00.000 -05:30", "2026-03-01T10:00:00Z"},
	} {
		got, err := z.parseTime(c.in)
		if err != nil || got.UTC().Format(time.RFC3339Nano) != c.want {
			t.Errorf("%q: %v %v, want %s", c.in, got.UTC(), err, c.want)
		}
	}
	if len(warned) != 0 {
		t.Errorf("warnings %q", warned)
	}
	msk := zones{loc: time.FixedZone("MSK", 3*3600), warn: z.warn}
	if got, err := msk.parseTime("2026-03-01 13:00:00.000 MSK"); err != nil || got.UTC().Hour() != 10 {
		t.Errorf("MSK in Options.Location: %v %v", got, err)
	}
	if _, err := z.parseTime("2026-03-01 13:00"); err == nil {
		t.Error("a time without milliseconds parsed")
	}
}

func TestTransactionStatus(t *testing.T) {
	var c classifier
	cases := []struct {
		sql            string
		before         byte
		ok, afterError byte
	}{
		{"BEGIN", txIdle, txInTx, txFailed},
		{"start transaction isolation level serializable", txIdle, txInTx, txFailed},
		{"END", txInTx, txIdle, txIdle},
		{"COMMIT AND CHAIN", txInTx, txInTx, 0}, // failing: not checked
		{"ROLLBACK", txFailed, txIdle, txIdle},
		{"ROLLBACK TO SAVEPOINT a", txFailed, txInTx, txFailed},
		{"PREPARE TRANSACTION 'x'", txInTx, txIdle, txIdle},
		{"UPDATE t SET a = 1", txIdle, txIdle, txIdle},
		{"UPDATE t SET a = 1", txInTx, txInTx, txFailed},
		{"BEGIN; UPDATE t SET a = 1; COMMIT", txIdle, txIdle, txFailed},
		{"SELEC 1", txInTx, txInTx, txFailed},
	}
	for _, tc := range cases {
		cl := c.classify(tc.sql)
		if got := cl.after(tc.before); got != tc.ok {
			t.Errorf("%q from %c: %c, want %c", tc.sql, tc.before, got, tc.ok)
		}
		if got := cl.failed(tc.before); tc.afterError != 0 && got != tc.afterError {
			t.Errorf("%q failing from %c: %c, want %c", tc.sql, tc.before, got, tc.afterError)
		}
	}
	for _, sql := range []string{"COPY t FROM STDIN", "copy t (a) from stdin with (format csv)"} {
		if !c.classify(sql).copyIn {
			t.Errorf("%q not taken as COPY FROM STDIN", sql)
		}
	}
	for _, sql := range []string{"COPY t TO STDOUT", "COPY t FROM '/tmp/x'", "SELECT 'COPY t FROM STDIN'"} {
		if c.classify(sql).copyIn {
			t.Errorf("%q taken as COPY FROM STDIN", sql)
		}
	}
}

// TestCarriageReturnKept: a statement sent with CRLF line ends (Windows
// clients) keeps its CRs in stderr and csvlog as in jsonlog.
func TestCarriageReturnKept(t *testing.T) {
	stderr := "2026-03-01 10:00:00.000 UTC [100] 65e1a8a0.64 1 00000 user=u db=d app=a LOG:  statement: SELECT 1,\r\n" +
		"\t2\r\n" +
		"2026-03-01 10:00:00.001 UTC [100] 65e1a8a0.64 2 00000 user=u db=d app=a LOG:  duration: 0.100 ms\n"
	csv := "2026-03-01 10:00:00.000 UTC,\"u\",\"d\",100,\"[local]\",65e1a8a0.64,1,\"idle\",2026-03-01 10:00:00 UTC,3/2,0,LOG,00000," +
		"\"statement: SELECT 1,\r\n2\r\",,,,,,,,,\"a\",\"client backend\",,0\n"
	json := `{"timestamp":"2026-03-01 10:00:00.000 UTC","user":"u","dbname":"d","pid":100,"session_id":"65e1a8a0.64",` +
		`"error_severity":"LOG","message":"statement: SELECT 1,\r\n2\r","application_name":"a","backend_type":"client backend"}` + "\n"
	for name, text := range map[string]string{"x.log": stderr, "x.csv": csv, "x.json": json} {
		c, sum := convert(t, Options{}, writeTemp(t, name, text))
		if len(c.Events) != 3 || c.Events[1].SQL != "SELECT 1,\r\n2\r" || sum.Synthetic != 1 || len(sum.Problems) != 0 {
			t.Errorf("%s: %+v, problems %q", name, c.Events, sum.Problems)
		}
	}
}
