package replay

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/erplab/erplab/internal/capture"
)

// script builds capture events from a scripted scenario, the way a
// capture would record them: each session's clock advances by its
// statements' durations plus a gap, and every statement carries its
// outcome (rows, tag, transaction status after it).
type script struct {
	events []capture.Event
}

// sess is one scripted session.
type sess struct {
	s  *script
	id string
	t  int64  // µs: when the next event is sent
	tx string // transaction status
}

func (s *script) session(id, app string, at int64) *sess {
	b := &sess{s: s, id: id, t: at, tx: "I"}
	b.add(capture.Event{Kind: capture.KindConnect, Params: map[string]string{"application_name": app, "user": "someone", "database": "prod"}}, 0)
	return b
}

// add appends e at the session's clock, then moves the clock by dur and
// a gap of 10 µs.
func (b *sess) add(e capture.Event, dur int64) {
	e.Session, e.T, e.Duration = b.id, b.t, dur
	b.s.events = append(b.s.events, e)
	b.t += dur + 10
}

// after sets the transaction status a statement leaves by its text's
// first word (BEGIN, COMMIT/END, ROLLBACK) and returns it.
func (b *sess) after(sql string) string {
	switch w := strings.ToUpper(strings.Fields(sql)[0]); w {
	case "BEGIN", "START":
		b.tx = "T"
	case "COMMIT", "END", "ROLLBACK":
		b.tx = "I"
	}
	return b.tx
}

// query is a simple Query with its outcome.
func (b *sess) query(sql string, dur, rows int64, tag string) {
	b.add(capture.Event{Kind: capture.KindQuery, SQL: sql, Rows: rows, Tag: tag, TxAfter: b.after(sql)}, dur)
}

// prepare is a Parse of name with parameter OIDs or type names.
func (b *sess) prepare(name, sql string, oids []uint32, types []string) {
	b.add(capture.Event{Kind: capture.KindPrepare, Name: name, SQL: sql, ParamOIDs: oids, TypeNames: types, Rows: -1}, 5)
}

// execute is Bind + Execute of name (or of sql as the unnamed statement).
func (b *sess) execute(name, sql string, formats []int16, values [][]byte, dur, rows int64, tag string) {
	b.add(capture.Event{Kind: capture.KindExecute, Name: name, SQL: sql, Formats: formats, Values: values,
		Rows: rows, Tag: tag, TxAfter: b.after(tag)}, dur)
}

func (b *sess) copyIn(sql string, data []byte, rows int64) {
	b.add(capture.Event{Kind: capture.KindCopy, SQL: sql, Data: data, Rows: rows, Tag: fmt.Sprintf("COPY %d", rows), TxAfter: b.tx}, 50)
}

func (b *sess) disconnect() { b.add(capture.Event{Kind: capture.KindDisconnect}, 0) }

// sorted returns the events in capture order (by time; a session's own
// events keep their order).
func (s *script) sorted() []capture.Event {
	out := append([]capture.Event(nil), s.events...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

// tpcb is a pgbench tpcb-like scenario on scale 1 (1 branch, 10 tellers,
// 1000 accounts), four sessions of n transactions each, one per
// protocol: simple Query with literals, named prepared statements with
// type OIDs, the unnamed statement with binary int4 parameters (and a
// binary result), prepared statements typed by name (as the 1C journal
// gives them); and a fifth session that COPYs history rows and inserts
// two more in one Query. Transactions of the sessions follow
// each other in time. delta is the sum of every transaction's delta;
// history the rows pgbench_history ends with.
type tpcb struct {
	events  []capture.Event
	delta   int64
	history int64
	// statements: queries, executes and copies; prepares: Parses.
	statements, prepares int64
}

const (
	updAcc = "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"
	selAcc = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
	updTel = "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2"
	updBr  = "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2"
	insHis = "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)"
)

const oidInt4 = 23

func newTPCB(n int, seed uint64) *tpcb {
	rng := rand.New(rand.NewPCG(seed, 1))
	s := &script{}
	p := &tpcb{}
	sessions := []*sess{
		s.session("simple", "pgbench-simple", 0),
		s.session("named", "pgbench-named", 100),
		s.session("binary", "pgbench-binary", 200),
		s.session("typed", "pgbench-typed", 300),
	}
	prepareNamed(sessions[1], []uint32{oidInt4, oidInt4}, nil)
	prepareNamed(sessions[3], nil, []string{"integer", "integer"})
	p.prepares += 10
	for j := 0; j < n; j++ {
		for i, b := range sessions {
			b.t = max(b.t, int64(j)*2000+int64(i)*400+1000)
			aid, tid, delta := 1+rng.IntN(1000), 1+rng.IntN(10), rng.IntN(10001)-5000
			p.delta += int64(delta)
			switch i {
			case 0:
				simpleTx(b, aid, tid, delta)
			case 1, 3:
				namedTx(b, aid, tid, delta)
			case 2:
				binaryTx(b, aid, tid, delta)
				p.prepares += 5
			}
			p.statements += 7
			p.history++
		}
	}
	c := s.session("copy", "pgbench-copy", int64(n)*1000)
	c.copyIn("COPY pgbench_history (tid, bid, aid, delta) FROM STDIN", []byte("1\t1\t1\t0\n2\t1\t2\t0\n3\t1\t3\t0\n"), 3)
	// one Query, two statements: rows summed over its commands
	c.query("INSERT INTO pgbench_history (tid, bid, aid, delta) VALUES (4, 1, 4, 0); "+
		"INSERT INTO pgbench_history (tid, bid, aid, delta) VALUES (5, 1, 5, 0)", 30, 2, "INSERT 0 1")
	c.disconnect()
	p.history += 5
	p.statements += 2
	for _, b := range sessions {
		b.disconnect()
	}
	p.events = s.sorted()
	return p
}

func simpleTx(b *sess, aid, tid, delta int) {
	b.query("BEGIN", 20, 0, "BEGIN")
	b.query(fmt.Sprintf("UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d", delta, aid), 40, 1, "UPDATE 1")
	b.query(fmt.Sprintf("SELECT abalance FROM pgbench_accounts WHERE aid = %d", aid), 30, 1, "SELECT 1")
	b.query(fmt.Sprintf("UPDATE pgbench_tellers SET tbalance = tbalance + %d WHERE tid = %d", delta, tid), 40, 1, "UPDATE 1")
	b.query(fmt.Sprintf("UPDATE pgbench_branches SET bbalance = bbalance + %d WHERE bid = 1", delta), 40, 1, "UPDATE 1")
	b.query(fmt.Sprintf("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (%d, 1, %d, %d, CURRENT_TIMESTAMP)", tid, aid, delta), 40, 1, "INSERT 0 1")
	b.query("END", 30, 0, "COMMIT")
}

// prepareNamed prepares the five tpcb statements and the transaction
// bounds under names, typed by OIDs or by type names.
func prepareNamed(b *sess, oids []uint32, types []string) {
	two := func(n int) ([]uint32, []string) {
		if oids != nil {
			return oids[:n], nil
		}
		return nil, types[:n]
	}
	o, t := two(2)
	b.prepare("upd_acc", updAcc, o, t)
	o1, t1 := two(1)
	b.prepare("sel_acc", selAcc, o1, t1)
	b.prepare("upd_tel", updTel, o, t)
	b.prepare("upd_br", updBr, o, t)
	o4, t4 := append(append([]uint32(nil), o...), o...), append(append([]string(nil), t...), t...)
	if oids == nil {
		o4 = nil
	} else {
		t4 = nil
	}
	b.prepare("ins_his", insHis, o4, t4)
}

func text(v ...int) [][]byte {
	out := make([][]byte, len(v))
	for i, x := range v {
		out[i] = []byte(fmt.Sprint(x))
	}
	return out
}

func namedTx(b *sess, aid, tid, delta int) {
	b.query("BEGIN", 20, 0, "BEGIN")
	b.execute("upd_acc", "", nil, text(delta, aid), 40, 1, "UPDATE 1")
	b.execute("sel_acc", "", nil, text(aid), 30, 1, "SELECT 1")
	b.execute("upd_tel", "", nil, text(delta, tid), 40, 1, "UPDATE 1")
	b.execute("upd_br", "", nil, text(delta, 1), 40, 1, "UPDATE 1")
	b.execute("ins_his", "", nil, text(tid, 1, aid, delta), 40, 1, "INSERT 0 1")
	b.query("END", 30, 0, "COMMIT")
}

// int4 is the binary form of an int4 parameter.
func int4(v int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(int32(v))) }

// binaryTx runs the tpcb statements as the unnamed statement, each Parse
// typed int4 and its parameters bound in binary.
func binaryTx(b *sess, aid, tid, delta int) {
	bin := []int16{1}
	unnamed := func(sql string, vals [][]byte, rows int64, tag string) {
		oids := make([]uint32, len(vals))
		for i := range oids {
			oids[i] = oidInt4
		}
		b.prepare("", sql, oids, nil)
		b.execute("", sql, bin, vals, 40, rows, tag)
	}
	b.query("BEGIN", 20, 0, "BEGIN")
	unnamed(updAcc, [][]byte{int4(delta), int4(aid)}, 1, "UPDATE 1")
	unnamed(selAcc, [][]byte{int4(aid)}, 1, "SELECT 1")
	b.s.events[len(b.s.events)-1].ResultFormats = []int16{1} // the balance in binary
	unnamed(updTel, [][]byte{int4(delta), int4(tid)}, 1, "UPDATE 1")
	unnamed(updBr, [][]byte{int4(delta), int4(1)}, 1, "UPDATE 1")
	unnamed(insHis, [][]byte{int4(tid), int4(1), int4(aid), int4(delta)}, 1, "INSERT 0 1")
	b.query("END", 30, 0, "COMMIT")
}

// tpcbSchema is pgbench's tables at scale 1 with zero balances.
const tpcbSchema = `
CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int, filler char(88));
CREATE TABLE pgbench_tellers (tid int PRIMARY KEY, bid int, tbalance int, filler char(84));
CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84));
CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
INSERT INTO pgbench_branches SELECT 1, 0;
INSERT INTO pgbench_tellers SELECT t, 1, 0 FROM generate_series(1, 10) t;
INSERT INTO pgbench_accounts SELECT a, 1, 0 FROM generate_series(1, 1000) a;
`
