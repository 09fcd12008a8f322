package techlog

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/capture"
)

// writeJournal writes evs with a Writer under a new directory.
func writeJournal(t *testing.T, started time.Time, evs []capture.Event) string {
	t.Helper()
	dir := t.TempDir()
	w, err := NewWriter(dir, WriterOptions{Started: started})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatalf("Write(%+v): %v", e, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// roundTripEvents are events in the shape the journal gives back: three
// sessions over two hours, typed and untyped values with quotes,
// backslashes, a line end, NULL and an empty string, errors in and out
// of a transaction, unknown rows and transaction status.
func roundTripEvents() []capture.Event {
	const op7 = "Форма.Вызов : Документ.ЗаказКлиента.Форма.ФормаДокумента.Модуль.ЗаписатьНаСервере"
	c := func(s string, t int64, user string, pid int32) capture.Event {
		p := map[string]string{"application_name": "1C"}
		if user != "" {
			p["user"] = user
		}
		return capture.Event{Kind: capture.KindConnect, Session: s, T: t, Params: p, BackendPID: pid}
	}
	q := func(s string, t int64, sql string, dur, rows int64, tx, op string) capture.Event {
		return capture.Event{Kind: capture.KindQuery, Session: s, T: t, SQL: sql, Duration: dur, Rows: rows, TxAfter: tx, Operation: op}
	}
	x := func(s string, t int64, sql string, types []string, values [][]byte, dur, rows int64, tx, op, err string) capture.Event {
		return capture.Event{Kind: capture.KindExecute, Session: s, T: t, SQL: sql, TypeNames: types, Values: values,
			Duration: dur, Rows: rows, TxAfter: tx, Operation: op, SQLState: err}
	}
	d := func(s string, t int64) capture.Event {
		return capture.Event{Kind: capture.KindDisconnect, Session: s, T: t}
	}
	return []capture.Event{
		c("7", 0, "erp_user", 4101),
		q("7", 0, "BEGIN", 100, 0, "T", op7),
		x("7", 200, "UPDATE stock\nSET qty = qty - $1\nWHERE item = $2 AND note <> $3", []string{"numeric", "varchar", "text"},
			[][]byte{[]byte("12.5"), []byte(`Склад 'Центральный', "Север" \ ряд 2`), []byte("line 1\nline 2")}, 3000, 1, "T", op7, ""),
		c("8", 1000, "Сидоров", 4102),
		x("8", 1000, "SELECT a, b FROM t WHERE a = $1 AND b = $2 AND c = $3 AND d = $4", []string{"", "bpchar", "bytea", ""},
			[][]byte{[]byte("42"), nil, []byte(`\x00ff`), []byte("NULL")}, 125_000_000, 3, "I", "Отчет.Остатки : Отчет.Остатки.Форма.ФормаОтчета.Модуль.Сформировать", ""),
		q("7", 3500, "COMMIT", 50, 0, "I", op7),
		x("7", 4000, "INSERT INTO codes (code) VALUES ($1)", []string{"varchar"}, [][]byte{{}}, 900, -1, "I", op7, "23505"),
		c("9", 5000, "", 0),
		q("9", 5000, "SELECT 1", 10, -1, "", ""),
		x("9", 6000, "SELECT $1::text, $2", []string{"", ""}, [][]byte{[]byte("TRUE"), []byte("it's")}, 20, 1, "", "", ""),
		d("9", 6020),
		d("8", 125_001_000),
		q("7", 130_000_000, "BEGIN", 100, 0, "T", op7),
		x("7", 130_000_500, "UPDATE stock SET qty = 0 WHERE item = $1", []string{"varchar"}, [][]byte{[]byte("A-1")}, 1_500_000, 0, "E", op7, "40001"),
		q("7", 131_500_600, "ROLLBACK", 80, 0, "I", op7),
		d("7", 131_500_680),
	}
}

func TestWriterRoundTrip(t *testing.T) {
	started := time.Date(2026, 3, 15, 9, 58, 0, 0, time.UTC)
	want := roundTripEvents()
	dir := writeJournal(t, started, want)
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
		}
		return nil
	})
	if w := []string{"rphost_2000/26031509.log", "rphost_2000/26031510.log", "rphost_2001/26031510.log"}; !reflect.DeepEqual(files, w) {
		t.Errorf("files = %v, want %v", files, w)
	}
	first, _ := os.ReadFile(filepath.Join(dir, "rphost_2000/26031509.log"))
	if p := "\uFEFF58:00.000100-100,DBPOSTGRS,5,process=rphost,p:processName=erp,"; !strings.HasPrefix(string(first), p) {
		t.Errorf("journal starts %q, want %q", first[:min(len(first), 80)], p)
	}
	h, got, sum := readAll(t, Options{}, dir)
	for i := range got {
		got[i].Where = ""
	}
	if !h.Started.Equal(started) || sum.BadLines != 0 {
		t.Errorf("Started %v (want %v), bad lines %d %v", h.Started, started, sum.BadLines, sum.Errors)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events back, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestWriterPreparedBinary(t *testing.T) {
	started := time.Date(2026, 3, 15, 9, 0, 0, 0, time.UTC)
	evs := []capture.Event{
		{Kind: capture.KindConnect, Session: "p1", Params: map[string]string{"user": "bench"}},
		{Kind: capture.KindPrepare, Session: "p1", Name: "s1", SQL: "SELECT $1 + 1, $2", ParamOIDs: []uint32{23, 25}},
		{Kind: capture.KindExecute, Session: "p1", T: 10, Name: "s1", Formats: []int16{1, 0},
			Values: [][]byte{{0, 0, 0, 42}, []byte("abc")}, Duration: 5, Rows: 1, TxAfter: "I"},
		{Kind: capture.KindCopy, Session: "p1", T: 20, SQL: "COPY t FROM STDIN", Data: []byte("1\n")},
	}
	dir := writeJournal(t, started, evs)
	_, got, _ := readAll(t, Options{}, dir)
	x := got[1]
	if x.Kind != capture.KindExecute || x.SQL != "SELECT $1 + 1, $2" || x.Session != "1000000" ||
		!reflect.DeepEqual(x.TypeNames, []string{"int4", "text"}) || !reflect.DeepEqual(strs(x.Values), []string{"42", "abc"}) {
		t.Errorf("prepared execute read back as %+v", x)
	}
	if len(got) != 3 {
		t.Errorf("%d events, want connect, execute, disconnect (COPY is not in the journal)", len(got))
	}

	if _, err := NewWriter(t.TempDir(), WriterOptions{}); err == nil {
		t.Errorf("a Writer without Started: no error")
	}
	w, err := NewWriter(t.TempDir(), WriterOptions{Started: started})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Write(capture.Event{Kind: capture.KindExecute, Session: "3", SQL: "SELECT $1", Formats: []int16{1}, Values: [][]byte{{1}}})
	if err == nil || !strings.Contains(err.Error(), "parameter $1: binary value of unknown type (OID 0)") {
		t.Errorf("binary value without a type: %v", err)
	}
	if err := w.Write(evs[3]); err != nil || w.Skipped[capture.KindCopy] != 1 {
		t.Errorf("COPY: %v, skipped %v", err, w.Skipped)
	}
}
