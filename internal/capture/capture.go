// Package capture owns erplab's capture format (`erplab-capture`, schema 1):
// the client sessions of a workload as the server saw them, from any of
// three sources (the proxy, a PostgreSQL server log, the 1C technological
// journal), in one shape that `erplab replay` reads.
//
// A capture is a gzip-compressed JSON Lines file (conventionally
// `*.erpcap.gz`). Its first line is a Header; every later line is one
// Event. Events are in capture order: by time, and within one session in
// the order the session sent them. The writer flushes the gzip stream at
// least once a second and on Close, so a capture whose writer was killed
// is readable up to its last flushed whole line (Reader reports the torn
// tail as Truncated, not as an error). See docs/capture-format.md.
package capture

import "time"

// Format and Schema identify the file; a reader refuses another format or
// a newer schema with one line naming both.
const (
	Format = "erplab-capture"
	Schema = 1
)

// Source names where a capture came from.
type Source string

// The sources.
const (
	SourceProxy   Source = "proxy"   // erplab proxy --capture: the wire protocol itself
	SourcePGLog   Source = "pglog"   // a PostgreSQL server log (csvlog, jsonlog, stderr)
	SourceTechLog Source = "techlog" // the 1C technological journal (DBPOSTGRS events)
)

// Header is the first line of a capture.
type Header struct {
	Type    string    `json:"type"` // "header"
	Format  string    `json:"format"`
	Schema  int       `json:"schema"`
	Source  Source    `json:"source"`
	Started time.Time `json:"started"` // the time origin: every Event.T counts from it
	// Origin describes the input: file names, log format and prefix, the
	// proxy's upstream (never a password), the erplab version.
	Origin map[string]string `json:"origin,omitempty"`
	// Partial is set when the source holds only some statements (a
	// journal filtered by duration, a log with log_min_duration_statement
	// above 0): a replay of it is not the whole workload, and says so.
	Partial string `json:"partial,omitempty"`
}

// Kind is what an Event is.
type Kind string

// The kinds of event. A session is opened by KindConnect and ended by
// KindDisconnect; statements lie between.
const (
	KindConnect    Kind = "connect"    // a session starts: Params hold its startup parameters
	KindQuery      Kind = "query"      // a simple-protocol Query (may hold several statements)
	KindPrepare    Kind = "prepare"    // extended protocol Parse: Name ("" = unnamed), SQL, ParamOIDs
	KindExecute    Kind = "execute"    // Bind + Execute of statement Name (or unnamed SQL) with Params
	KindCopy       Kind = "copy"       // COPY ... FROM STDIN: SQL and the CopyData in Data
	KindDisconnect Kind = "disconnect" // the session ends (Terminate, or the log's disconnection)
)

// Event is one line after the header. Fields that do not apply to a kind
// are omitted. Durations and times are microseconds.
type Event struct {
	Kind Kind `json:"k"`
	// Session identifies the client session within the capture (the
	// proxy's connection number; the log's session_id; the journal's
	// t:connectID, or dbpid when absent).
	Session string `json:"s"`
	// T is when the client sent it, in microseconds since Header.Started.
	T int64 `json:"t"`

	// KindConnect: startup parameters (user, database, application_name,
	// options...), never a password. BackendPID when the source knows it.
	Params     map[string]string `json:"params,omitempty"`
	BackendPID int32             `json:"pid,omitempty"`

	// KindQuery, KindPrepare, KindCopy, and KindExecute of an unnamed
	// statement: the SQL text as sent.
	SQL string `json:"sql,omitempty"`
	// KindPrepare, KindExecute: the prepared statement's name.
	Name string `json:"name,omitempty"`
	// KindPrepare: parameter type OIDs as the client declared them (0 =
	// let the server infer). TypeNames: the same by name where the source
	// gives names and not OIDs (the journal's ::type, after mapping).
	ParamOIDs []uint32 `json:"param_oids,omitempty"`
	TypeNames []string `json:"param_types,omitempty"`
	// KindPrepare: the parameter types the server reported for the
	// statement (ParameterDescription) when the client described it in
	// the Parse's batch, as pgx and JDBC do before binding in binary: the
	// types the bound values' bytes are in, whatever ParamOIDs declared.
	ServerParamOIDs []uint32 `json:"server_param_oids,omitempty"`
	// KindExecute: the bound values. Formats per value (0 text, 1
	// binary; one entry applies to all, as in Bind); Values as raw bytes
	// (JSON base64), a nil entry is SQL NULL. ResultFormats as in Bind.
	Formats       []int16  `json:"formats,omitempty"`
	Values        [][]byte `json:"values,omitempty"`
	ResultFormats []int16  `json:"result_formats,omitempty"`
	// KindCopy, and KindExecute of a statement that is a COPY FROM
	// STDIN: the data sent with CopyData, concatenated.
	Data []byte `json:"data,omitempty"`

	// Outcome as the server answered, when the source knows it.
	// Duration: from sending to the answer's end (µs); Rows: rows
	// returned or affected (-1 unknown); SQLState: "" for success;
	// Tag: the command tag (e.g. "UPDATE 1").
	Duration int64  `json:"dur,omitempty"`
	Rows     int64  `json:"rows,omitempty"`
	SQLState string `json:"err,omitempty"`
	Tag      string `json:"tag,omitempty"`
	// TxAfter is the transaction status after the statement ('I' idle,
	// 'T' in a transaction, 'E' failed) when known; with T+Duration it
	// gives each transaction's commit time, which replay uses to keep the
	// captured commit order between sessions.
	TxAfter string `json:"tx,omitempty"`

	// Operation is the key operation the statement belongs to, when the
	// source names one (the journal's Context, first line); replay may
	// also group by a targets file or by statement fingerprint.
	Operation string `json:"op,omitempty"`
	// Where: the input location ("file:line") for messages about it.
	Where string `json:"at,omitempty"`
	// Note: the source's remarks on the event, comma-separated words
	// (see Note*), "" when none.
	Note string `json:"note,omitempty"`
}

// Words of Event.Note.
const (
	// NoteRewritten: the proxy sent the server a rewritten text (the
	// event holds the client's); the outcome is the rewritten text's.
	NoteRewritten = "rewritten"
	// NoteUnanswered: written before the server answered (the session
	// ended first, or the proxy's capture memory ran out while it ran):
	// the outcome is unknown (Rows -1).
	NoteUnanswered = "unanswered"
	// NoteDataCut: the COPY data was still arriving when the event was
	// written; Data holds only what came before.
	NoteDataCut = "data-cut"
	// NoteCopyFail: the client ended the COPY with CopyFail.
	NoteCopyFail = "copy-fail"
)
