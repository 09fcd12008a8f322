package techlog

import (
	"strconv"
	"strings"
)

// statement is what a DBPOSTGRS event says: start and duration (µs;
// start counts from the Unix epoch in the journal's zone), session key,
// user, backend pid, SQL, parameters (nil without Prm), rows (-1
// unknown), SQLSTATE ("" success), Trans ("0", "1" or ""), operation
// (first line of Context), database (DataBase).
type statement struct {
	start, dur int64
	session    string
	user       string
	pid        int32
	sql        string
	params     []param
	rows       int64
	sqlState   string
	trans      string
	operation  string
	database   string
}

// interpret reads a DBPOSTGRS record whose hour starts at hour (µs since
// the epoch). A record without Sql gives ok false and no error.
func interpret(r *record, hour int64) (st statement, ok bool, pe *posErr) {
	sql, has := r.get("Sql")
	if !has || strings.TrimSpace(sql.value) == "" {
		return st, false, nil
	}
	end := hour + (int64(r.min)*60+int64(r.sec))*1e6 + int64(r.usec)
	st = statement{start: end - r.dur, dur: r.dur, sql: sql.value, rows: -1}
	if pe = st.identity(r); pe != nil {
		return st, false, pe
	}
	if pe = st.outcome(r); pe != nil {
		return st, false, pe
	}
	if p, has := r.get("Prm"); has {
		ps, err := parsePrm(p.value)
		if err != nil {
			li, bi := r.locate(p, err.off)
			return st, false, &posErr{li, bi, "Prm: " + err.msg}
		}
		st.params = ps
	}
	if p, has := r.get("Context"); has {
		st.operation = firstLine(p.value)
	}
	st.database = value(r, "DataBase")
	return st, true, nil
}

// value is the first property called name, "" when absent.
func value(r *record, name string) string {
	p, _ := r.get(name)
	return p.value
}

// identity sets the session key (t:connectID, else "s" + SessionID,
// else "p" + dbpid), the user and the backend pid.
func (st *statement) identity(r *record) *posErr {
	if p, has := r.get("dbpid"); has && p.value != "" {
		pid, err := strconv.ParseInt(p.value, 10, 32)
		if err != nil || pid < 0 {
			return &posErr{p.li, p.bi, "dbpid is not a process id: " + strconv.Quote(p.value)}
		}
		st.pid = int32(pid)
	}
	st.user = value(r, "Usr")
	switch {
	case value(r, "t:connectID") != "":
		st.session = value(r, "t:connectID")
	case value(r, "SessionID") != "":
		st.session = "s" + value(r, "SessionID")
	case st.pid != 0:
		st.session = "p" + strconv.Itoa(int(st.pid))
	default:
		return &posErr{0, 0, "DBPOSTGRS without t:connectID, SessionID or dbpid: no session to put it in"}
	}
	return nil
}

// outcome sets rows (RowsAffected), Trans and the SQLSTATE (Result, or
// Descr for an error).
func (st *statement) outcome(r *record) *posErr {
	if p, has := r.get("RowsAffected"); has && p.value != "" {
		n, err := strconv.ParseInt(p.value, 10, 64)
		if err != nil {
			return &posErr{p.li, p.bi, "RowsAffected is not a number: " + strconv.Quote(p.value)}
		}
		st.rows = n
	}
	if p, has := r.get("Trans"); has {
		if p.value != "0" && p.value != "1" && p.value != "" {
			return &posErr{p.li, p.bi, "Trans is not 0 or 1: " + strconv.Quote(p.value)}
		}
		st.trans = p.value
	}
	st.sqlState = sqlState(value(r, "Result"), value(r, "Descr"))
	return nil
}

// UnknownSQLState is the SQLSTATE given to a statement the journal says
// failed without saying how: PostgreSQL's internal_error class.
const UnknownSQLState = "XX000"

// sqlState reads libpq's result status as 1C logs it: PGRES_TUPLES_OK,
// PGRES_COMMAND_OK and the other non-error statuses (or an empty Result)
// are success; an error status takes the SQLSTATE from Descr ("SQLSTATE
// 40001" or "SQLSTATE: 40001") or else UnknownSQLState. A Result that is
// itself a SQLSTATE is taken as it is (class 00 is success).
func sqlState(result, descr string) string {
	switch result {
	case "", "PGRES_TUPLES_OK", "PGRES_COMMAND_OK", "PGRES_EMPTY_QUERY", "PGRES_COPY_IN",
		"PGRES_COPY_OUT", "PGRES_COPY_BOTH", "PGRES_SINGLE_TUPLE", "PGRES_TUPLES_CHUNK", "PGRES_PIPELINE_SYNC":
		return ""
	}
	if isSQLState(result) {
		if strings.HasPrefix(result, "00") {
			return ""
		}
		return result
	}
	if i := strings.Index(descr, "SQLSTATE"); i >= 0 {
		rest := strings.TrimLeft(descr[i+len("SQLSTATE"):], ": =")
		if len(rest) >= 5 && isSQLState(rest[:5]) {
			return rest[:5]
		}
	}
	return UnknownSQLState
}

// isSQLState reports whether s is five digits or upper-case letters.
func isSQLState(s string) bool {
	if len(s) != 5 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// firstLine is the first line of s that is not blank, trimmed.
func firstLine(s string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}
