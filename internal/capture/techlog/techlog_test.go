package techlog

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/capture"
)

// readAll reads the journal under paths: header, events, summary.
func readAll(t *testing.T, opts Options, paths ...string) (capture.Header, []capture.Event, *Summary) {
	t.Helper()
	var h capture.Header
	var evs []capture.Event
	sum, err := Read(context.Background(), paths, opts, func(hd capture.Header) error { h = hd; return nil },
		func(e capture.Event) error { evs = append(evs, e); return nil })
	if err != nil {
		t.Fatalf("Read(%v): %v", paths, err)
	}
	return h, evs, sum
}

// find is the event at location where (Where), of kind k.
func find(t *testing.T, evs []capture.Event, k capture.Kind, where string) capture.Event {
	t.Helper()
	for _, e := range evs {
		if e.Kind == k && e.Where == where {
			return e
		}
	}
	t.Fatalf("no %s event at %s", k, where)
	return capture.Event{}
}

func TestJournalCounts(t *testing.T) {
	h, evs, sum := readAll(t, Options{}, "testdata/journal")
	kinds := map[capture.Kind]int{}
	for _, e := range evs {
		kinds[e.Kind]++
	}
	want := map[capture.Kind]int{capture.KindConnect: 3, capture.KindQuery: 7, capture.KindExecute: 5, capture.KindDisconnect: 3}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("events by kind = %v, want %v", kinds, want)
	}
	got := fmt.Sprintf("files %d records %d statements %d queries %d executes %d sessions %d failed %d nosqlstate %d bad %d",
		sum.Files, sum.Records, sum.Statements, sum.Queries, sum.Executes, sum.Sessions, sum.Failed, sum.NoSQLState, sum.BadLines)
	if w := "files 4 records 18 statements 12 queries 7 executes 5 sessions 3 failed 2 nosqlstate 1 bad 1"; got != w {
		t.Errorf("summary: %s\nwant     %s", got, w)
	}
	other := map[string]int{"CALL": 2, "EXCP": 1, "TDEADLOCK": 1, "TLOCK": 1, "TTIMEOUT": 1}
	if !reflect.DeepEqual(sum.Other, other) {
		t.Errorf("skipped events = %v, want %v", sum.Other, other)
	}
	types := []TypeMapping{{"mchar", "bpchar", 1}, {"mvarchar", "varchar", 4}}
	if !reflect.DeepEqual(sum.Types, types) {
		t.Errorf("mapped types = %v, want %v", sum.Types, types)
	}
	if len(sum.Errors) != 1 || sum.Errors[0].Error() != "rphost_4388/26031510.log:5:73: the file ends inside this event (no line end): a torn last record" {
		t.Errorf("errors = %v, want the torn last record only", sum.Errors)
	}
	if h.Source != capture.SourceTechLog || h.Format != capture.Format || h.Partial != "" || h.Origin["database"] != `pgsrv\erp` {
		t.Errorf("header = %+v", h)
	}
	notes := strings.Join(sum.Notes(), "\n")
	for _, n := range []string{"12 statements (5 with parameters) in 3 sessions from 18 events in 4 files", "type mvarchar (1C's PostgreSQL build) is bound as varchar (4 parameters)", "1 TDEADLOCK event:", "1 TTIMEOUT event:"} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes lack %q:\n%s", n, notes)
		}
	}
}

func TestJournalStatement(t *testing.T) {
	_, evs, _ := readAll(t, Options{}, "testdata/journal")
	ins := find(t, evs, capture.KindExecute, "rphost_4120/26031509.log:7")
	wantTypes := []string{"bytea", "", "", "timestamp", "timestamp", "varchar", "", "bytea", "varchar"}
	wantValues := []string{`\x9b4e00155d01a80b11ee1b2a7c4d3e21`, "1", "FALSE", "2026-03-15 09:12:00", "2026-03-15 00:00:00",
		"ЦБ-000412", "TRUE", `\x8a1c00155d01a80b11ee0f3e5b6a7c90`, "Отгрузка по заказу 'З-118', самовывоз"}
	if !reflect.DeepEqual(ins.TypeNames, wantTypes) {
		t.Errorf("types = %q, want %q", ins.TypeNames, wantTypes)
	}
	if got := strs(ins.Values); !reflect.DeepEqual(got, wantValues) {
		t.Errorf("values = %q, want %q", got, wantValues)
	}
	if !strings.HasPrefix(ins.SQL, "INSERT INTO _Document312 (") || !strings.HasSuffix(ins.SQL, ")\nVALUES($1,$2,$3,$4,$5,$6,$7,$8,$9)") {
		t.Errorf("SQL = %q", ins.SQL)
	}
	// Ends 12:03.519877 after 3405 µs; the journal starts with BEGIN at
	// 12:03.514201 - 142 µs = 12:03.514059.
	if ins.Session != "1842" || ins.T != 519877-3405-514059 || ins.Duration != 3405 || ins.Rows != 1 || ins.TxAfter != "T" || ins.SQLState != "" {
		t.Errorf("INSERT = session %s t %d dur %d rows %d tx %q err %q", ins.Session, ins.T, ins.Duration, ins.Rows, ins.TxAfter, ins.SQLState)
	}
	upd := find(t, evs, capture.KindExecute, "rphost_4388/26031509.log:3")
	if got := strs(upd.Values); got[0] != "Статус: 'Согласовано'" || upd.SQLState != "40001" || upd.TxAfter != "E" || upd.Rows != 0 {
		t.Errorf("failed UPDATE = values %q err %q tx %q rows %d", got, upd.SQLState, upd.TxAfter, upd.Rows)
	}
	mc := find(t, evs, capture.KindExecute, "rphost_4120/26031509.log:20")
	if mc.TypeNames[2] != "bpchar(5)" || string(mc.Values[2]) != "ОСН  " || string(mc.Values[0]) != "12.000" {
		t.Errorf("UPDATE with mchar(5): types %q values %q", mc.TypeNames, strs(mc.Values))
	}
	for where, tx := range map[string]string{"rphost_4120/26031509.log:4": "T", "rphost_4120/26031509.log:26": "I", "rphost_4388/26031509.log:8": "I"} {
		if q := find(t, evs, capture.KindQuery, where); q.TxAfter != tx {
			t.Errorf("%s %q: tx %q, want %q", where, q.SQL, q.TxAfter, tx)
		}
	}
	c := evs[0]
	if c.Kind != capture.KindConnect || c.Session != "1842" || c.BackendPID != 28311 ||
		!reflect.DeepEqual(c.Params, map[string]string{"user": "Иванова А.С.", "application_name": "1C"}) {
		t.Errorf("first event = %+v, want session 1842's connect", c)
	}
}

func strs(vs [][]byte) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

func TestJournalContextGrouping(t *testing.T) {
	_, evs, _ := readAll(t, Options{}, "testdata/journal")
	ops := map[string]int{}
	for _, e := range evs {
		if e.Kind == capture.KindQuery || e.Kind == capture.KindExecute {
			ops[e.Operation]++
		}
	}
	want := map[string]int{
		"Форма.Вызов : Документ.РеализацияТоваровУслуг.Форма.ФормаДокумента.Модуль.ЗаписатьНаСервере":            4,
		"Форма.Вызов : Обработка.СогласованиеЗаявок.Форма.Форма.Модуль.СогласоватьНаСервере":                     3,
		"Форма.Вызов : Обработка.СогласованиеЗаявок.Форма.Форма.Модуль.ОбновитьСписокНаСервере":                  2,
		"Форма.Вызов : Отчет.ОстаткиТоваров.Форма.ФормаОтчета.Модуль.СформироватьНаСервере":                      1,
		"РегламентноеЗадание.ОбновлениеИндексаППД : ОбщийМодуль.ПолнотекстовыйПоискСервер.Модуль.ОбновитьИндекс": 2,
	}
	if !reflect.DeepEqual(ops, want) {
		t.Errorf("statements by operation = %v\nwant %v", ops, want)
	}
}

func TestJournalHourFromFileName(t *testing.T) {
	msk := time.FixedZone("MSK", 3*3600)
	h, evs, _ := readAll(t, Options{Location: msk}, "testdata/journal")
	if want := time.Date(2026, 3, 15, 9, 12, 3, 514059000, msk); !h.Started.Equal(want) {
		t.Errorf("Started = %v, want %v", h.Started, want)
	}
	at := func(where string) time.Time {
		for _, e := range evs {
			if e.Where == where && e.Kind != capture.KindConnect {
				return h.Started.Add(time.Duration(e.T) * time.Microsecond)
			}
		}
		t.Fatalf("no statement at %s", where)
		return time.Time{}
	}
	// 05:44.100220 in 26031510.log, 2210 µs long.
	if got, want := at("rphost_4120/26031510.log:1"), time.Date(2026, 3, 15, 10, 5, 44, 98010000, msk); !got.Equal(want) {
		t.Errorf("start from the hour-10 file = %v, want %v", got, want)
	}
	// Ends 00:00.250114 in the hour-10 file after 500112 µs: it started
	// in hour 9, before the statement that starts 59:59.800000 in the
	// hour-9 file of the other process, and comes first in the stream.
	cross, late := at("rphost_4388/26031510.log:1"), at("rphost_4120/26031509.log:39")
	if want := time.Date(2026, 3, 15, 9, 59, 59, 750002000, msk); !cross.Equal(want) || !late.Equal(want.Add(49998*time.Microsecond)) {
		t.Errorf("cross-hour statement starts %v, the late one %v", cross, late)
	}
	if i, j := index(evs, "rphost_4388/26031510.log:1"), index(evs, "rphost_4120/26031509.log:39"); i > j {
		t.Errorf("cross-hour statement is event %d, after the later start at event %d", i, j)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].T < evs[i-1].T {
			t.Errorf("event %d at %d µs before event %d at %d µs", i, evs[i].T, i-1, evs[i-1].T)
		}
	}
}

func index(evs []capture.Event, where string) int {
	for i, e := range evs {
		if e.Where == where && e.Kind != capture.KindConnect {
			return i
		}
	}
	return -1
}

func TestJournalBadInput(t *testing.T) {
	_, evs, sum := readAll(t, Options{}, "testdata/corrupt")
	var got []string
	for _, e := range sum.Errors {
		got = append(got, e.Error())
	}
	f := "rphost_4120/26031509.log"
	want := []string{
		f + `:4:14: duration is not a number of microseconds: "14x2"`,
		f + ":14:1: Prm: p_<n>: expected",
		f + `:23:38: RowsAffected is not a number: "one"`,
		f + ":28:83: ',' or the end of the line expected after the closing quote",
		f + ":39:1: not the start of an event (mm:ss.uuuuuu-duration,EVENT,level,...)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// 4-6 (the record with the bad duration), 7-19, 20-25, 26-28, 39.
	if sum.BadLines != 3+13+6+3+1 || sum.Records != 5 || sum.Statements != 2 {
		t.Errorf("bad lines %d, records %d, statements %d; want 26, 5, 2", sum.BadLines, sum.Records, sum.Statements)
	}
	if late := find(t, evs, capture.KindQuery, f+":40"); !strings.Contains(late.SQL, "'Статус: ''Черновик'''") {
		t.Errorf("the statement after the pasted note: %q", late.SQL)
	}
}
