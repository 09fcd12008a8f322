package sampler

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/rewrite"
)

// TopStatements is how many statements Statements.Top keeps.
const TopStatements = 50

// statementText is how many characters of a statement's text Statements
// keep; keyText how many the closing snapshot reads, to key each text
// whole (StatementKey) before it is cut.
const (
	statementText = 2000
	keyText       = rewrite.MaxBytes
)

// statementsSQL (schema-qualified by the caller with %s) reads
// pg_stat_statements of the connected database (1.9+: toplevel). $1 is the
// number of characters of query text kept (0 = none, for the snapshot at
// the start). The second statement is pg_stat_statements_info's count of
// evicted entries and the track_planning setting.
const statementsSQL = `SELECT s.userid::int8, s.queryid, s.toplevel, s.calls, s.rows, s.plans,
       s.total_plan_time, s.total_exec_time,
       s.shared_blks_hit, s.shared_blks_read, s.shared_blks_dirtied, s.shared_blks_written,
       s.temp_blks_read, s.temp_blks_written,
       CASE WHEN $1::int4 > 0 THEN left(s.query, $1::int4) ELSE '' END
FROM %[1]s.pg_stat_statements(true) s
WHERE s.dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
  AND s.queryid IS NOT NULL`

const statementsInfoSQL = `SELECT (SELECT dealloc FROM %[1]s.pg_stat_statements_info),
       coalesce(current_setting('pg_stat_statements.track_planning', true), 'off')`

// StatementCounters are pg_stat_statements figures of one statement, or
// summed over several, over the run: times in ms, blocks of 8 kB.
type StatementCounters struct {
	Calls         int64   `json:"calls"`
	Rows          int64   `json:"rows"`
	Plans         int64   `json:"plans,omitempty"`
	PlanMs        float64 `json:"plan_ms"`
	ExecMs        float64 `json:"exec_ms"`
	SharedHit     int64   `json:"shared_blks_hit,omitempty"`
	SharedRead    int64   `json:"shared_blks_read,omitempty"`
	SharedDirtied int64   `json:"shared_blks_dirtied,omitempty"`
	SharedWritten int64   `json:"shared_blks_written,omitempty"`
	TempRead      int64   `json:"temp_blks_read,omitempty"`
	TempWritten   int64   `json:"temp_blks_written,omitempty"`
}

func (c StatementCounters) sub(p StatementCounters) StatementCounters {
	return StatementCounters{
		Calls: c.Calls - p.Calls, Rows: c.Rows - p.Rows, Plans: c.Plans - p.Plans,
		PlanMs: c.PlanMs - p.PlanMs, ExecMs: c.ExecMs - p.ExecMs,
		SharedHit: c.SharedHit - p.SharedHit, SharedRead: c.SharedRead - p.SharedRead,
		SharedDirtied: c.SharedDirtied - p.SharedDirtied, SharedWritten: c.SharedWritten - p.SharedWritten,
		TempRead: c.TempRead - p.TempRead, TempWritten: c.TempWritten - p.TempWritten,
	}
}

// MeanPlanMs and MeanExecMs are per call (0 without calls).
func (c StatementCounters) MeanPlanMs() float64 { return perCall(c.PlanMs, c.Calls) }
func (c StatementCounters) MeanExecMs() float64 { return perCall(c.ExecMs, c.Calls) }

func perCall(ms float64, calls int64) float64 {
	if calls <= 0 {
		return 0
	}
	return ms / float64(calls)
}

// Statement is one statement's pg_stat_statements delta over the run.
type Statement struct {
	QueryID  int64  `json:"queryid"`
	Toplevel bool   `json:"toplevel"`
	Query    string `json:"query"`
	StatementCounters
	// Operations is the share of this statement attributed to each key
	// operation (summing to 1): by the engine's count of the texts each
	// operation sent that have this statement's key (StatementKey), or
	// else from the operations its query_id was seen running in
	// (Sample.OpWaits' backends); empty when neither knows it.
	Operations map[string]float64 `json:"operations,omitempty"`
	// AttributedBy says which: "engine" or "samples" ("" when neither).
	AttributedBy string `json:"attributed_by,omitempty"`
}

// OpStatements are the statement figures attributed to one key operation
// ("" for those never seen in one): sums of each statement's counters
// times its share.
type OpStatements struct {
	Operation  string  `json:"operation"`
	Statements int     `json:"statements"`
	Calls      float64 `json:"calls"`
	PlanMs     float64 `json:"plan_ms"`
	ExecMs     float64 `json:"exec_ms"`
	SharedBlks float64 `json:"shared_blks,omitempty"` // hit + read
	TempBlks   float64 `json:"temp_blks,omitempty"`   // read + written
}

// Statements is pg_stat_statements over a run (Observations.Statements):
// the delta between a snapshot at the start of sampling and one at its
// end, for the connected database.
type Statements struct {
	// Note says why figures are missing or incomplete: the extension is
	// absent (and how to enable it), planning is not tracked, entries were
	// evicted. "" when complete.
	Note string `json:"note,omitempty"`
	// Evicted is the number of entries pg_stat_statements evicted during
	// the run (pg_stat_statements_info.dealloc): their figures are lost.
	Evicted int64 `json:"evicted,omitempty"`
	// TrackPlanning is pg_stat_statements.track_planning: without it
	// PlanMs is 0.
	TrackPlanning bool `json:"track_planning"`
	// Attribution says how the statements were attributed to key
	// operations: how many by the statement texts the engine saw each
	// operation send (exact), how many by the samples of
	// pg_stat_activity (a statement the engine did not send: a workload
	// driving its own load, statements nested in functions), how many not
	// at all.
	Attribution string `json:"attribution,omitempty"`
	// AttributedCalls are the calls attributed to key operations;
	// ObserverCalls those of the sampler's own queries (observerKeys);
	// OtherCalls the rest not attributed (set-up, other clients).
	AttributedCalls int64 `json:"attributed_calls"`
	ObserverCalls   int64 `json:"observer_calls"`
	OtherCalls      int64 `json:"other_calls"`
	// Count is the number of statements that ran; Total their sum.
	Count int               `json:"statements"`
	Total StatementCounters `json:"total"`
	// Operations per key operation, by total time descending; the
	// unattributed remainder last with Operation "".
	Operations []OpStatements `json:"operations,omitempty"`
	// Top are the TopStatements statements with the most plan + exec
	// time.
	Top []Statement `json:"top"`
}

type stmtKey struct {
	userID, queryID int64
	toplevel        bool
}

type stmtSnapshot struct {
	rows    map[stmtKey]Statement
	dealloc int64
	plan    bool
}

// ErrNoStatements is wrapped when pg_stat_statements cannot be read.
var errNoStatements = fmt.Errorf("pg_stat_statements is not available")

// statementsNote says how to enable pg_stat_statements, "" when it is
// there and recent enough.
func (s *Sampler) statementsNote() string {
	db := s.info.Database
	switch {
	case !s.info.StatementsPreloaded && s.ext.pgssSchema == "":
		return fmt.Sprintf("statements: pg_stat_statements is not loaded: set shared_preload_libraries = 'pg_stat_statements' (restart), then CREATE EXTENSION pg_stat_statements in database %s", db)
	case s.ext.pgssSchema == "":
		return fmt.Sprintf("statements: CREATE EXTENSION pg_stat_statements in database %s to see them", db)
	case !versionAtLeast(s.info.Statements, 1, 9):
		return fmt.Sprintf("statements: pg_stat_statements %s is too old (need 1.9, PostgreSQL 14+: ALTER EXTENSION pg_stat_statements UPDATE)", s.info.Statements)
	}
	return ""
}

// versionAtLeast compares an extension version "1.10" with major.minor.
func versionAtLeast(v string, major, minor int) bool {
	a, b, _ := strings.Cut(v, ".")
	ma, err1 := strconv.Atoi(a)
	mi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// snapshotStatements reads pg_stat_statements; text keeps that many
// characters of each query (0 = none).
// A connection lost (since the last sample or in the read) is opened
// again when the Sampler was made by Connect, and the read retried once:
// the figures are the server's, whatever the session.
func (s *Sampler) snapshotStatements(ctx context.Context, text int) (*stmtSnapshot, error) {
	if s.statementsNote() != "" {
		return nil, errNoStatements
	}
	snap, err := s.readStatements(ctx, text)
	if err == nil || s.cfg == nil || ctx.Err() != nil || (s.conn != nil && !s.conn.IsClosed()) {
		return snap, err
	}
	if rerr := s.reconnect(ctx); rerr != nil {
		return nil, fmt.Errorf("%w (reconnecting: %v)", err, rerr)
	}
	return s.readStatements(ctx, text)
}

// readStatements is one read of snapshotStatements.
func (s *Sampler) readStatements(ctx context.Context, text int) (*stmtSnapshot, error) {
	if s.conn == nil || s.conn.IsClosed() {
		return nil, fmt.Errorf("statements: connection closed")
	}
	qctx, cancel := context.WithTimeout(ctx, 3*s.opts.Timeout)
	defer cancel()
	schema := pgx.Identifier{s.ext.pgssSchema}.Sanitize()
	rows, err := s.conn.Query(qctx, fmt.Sprintf(statementsSQL, schema), text)
	if err != nil {
		return nil, fmt.Errorf("statements: %w", err)
	}
	snap := &stmtSnapshot{rows: map[stmtKey]Statement{}}
	var st Statement
	var uid int64
	_, err = pgx.ForEachRow(rows, []any{&uid, &st.QueryID, &st.Toplevel, &st.Calls, &st.Rows, &st.Plans,
		&st.PlanMs, &st.ExecMs, &st.SharedHit, &st.SharedRead, &st.SharedDirtied, &st.SharedWritten,
		&st.TempRead, &st.TempWritten, &st.Query}, func() error {
		k := stmtKey{uid, st.QueryID, st.Toplevel}
		if p, ok := snap.rows[k]; ok { // cannot happen: the key is pg_stat_statements'
			st.StatementCounters = addCounters(p.StatementCounters, st.StatementCounters)
		}
		snap.rows[k] = st
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("statements: %w", err)
	}
	var track string
	if err := s.conn.QueryRow(qctx, fmt.Sprintf(statementsInfoSQL, schema)).Scan(&snap.dealloc, &track); err != nil {
		return nil, fmt.Errorf("statements: %w", err)
	}
	snap.plan = track == "on"
	return snap, nil
}

func addCounters(a, b StatementCounters) StatementCounters {
	var zero StatementCounters
	return a.sub(zero.sub(b))
}

// StatementKey is the key by which statements are matched: the pg_query
// fingerprint of a text (which ignores constants, parameter numbers and
// white space, so a client's text and pg_stat_statements' normalized text
// of it share it), or the whitespace-folded text when it does not parse
// (cut short) or is beyond rewrite's limits.
func StatementKey(q string) string {
	if fp, err := rewrite.Fingerprint(q); err == nil {
		return fp
	}
	return strings.Join(strings.Fields(q), " ")
}

// AttributedPct is the share of the calls not the observer's own that
// were attributed to key operations, 0 when there were none.
func (s *Statements) AttributedPct() float64 {
	n := s.Total.Calls - s.ObserverCalls
	if n <= 0 {
		return 0
	}
	return 100 * float64(s.AttributedCalls) / float64(n)
}

// observerKeys are the StatementKeys of the sampler's own queries, by
// which they are named in the unattributed remainder.
func observerKeys() map[string]bool {
	out := map[string]bool{}
	for _, q := range []string{sessionsSQL, queriesSQL13, queriesSQL12, databaseSQL14, databaseSQL12,
		catalogSQL, infoSQL, opSessionsSQL14, opSessionsSQL12} {
		out[StatementKey(q)] = true
	}
	return out
}

// textOps turns the engine's texts per operation into send counts per
// operation by StatementKey (each distinct text keyed once).
func textOps(texts map[opmap.OpText]int64) map[string]map[int]int64 {
	out := map[string]map[int]int64{}
	keys := map[string]string{}
	for k, n := range texts {
		key, ok := keys[k.SQL]
		if !ok {
			key = StatementKey(k.SQL)
			keys[k.SQL] = key
		}
		if out[key] == nil {
			out[key] = map[int]int64{}
		}
		out[key][k.Op] += n
	}
	return out
}

// statementsDelta is the run's Statements from two snapshots, the
// query_id sightings per operation and the engine's sends per operation
// by StatementKey (textOps; names by index). A top-level statement whose
// key the engine sent is attributed by those sends; any other by its
// sightings.
func statementsDelta(a, b *stmtSnapshot, sightings map[sighting]int, names []string, sent map[string]map[int]int64) *Statements {
	out := &Statements{TrackPlanning: b.plan, Evicted: max(b.dealloc-a.dealloc, 0), Top: []Statement{}}
	seen := map[int64]map[int]int{}
	for k, n := range sightings {
		if seen[k.queryID] == nil {
			seen[k.queryID] = map[int]int{}
		}
		seen[k.queryID][k.op] += n
	}
	var byEngine, bySamples int
	observer := observerKeys()
	ops := map[string]*OpStatements{}
	opOf := func(name string) *OpStatements {
		if ops[name] == nil {
			ops[name] = &OpStatements{Operation: name}
		}
		return ops[name]
	}
	var all []Statement
	for k, cur := range b.rows {
		d := cur
		if p, ok := a.rows[k]; ok {
			d.StatementCounters = cur.StatementCounters.sub(p.StatementCounters)
		}
		if d.Calls <= 0 {
			continue
		}
		d.PlanMs, d.ExecMs = round3(d.PlanMs), round3(d.ExecMs)
		out.Count++
		out.Total = addCounters(out.Total, d.StatementCounters)
		var share map[string]float64
		if len(sent) > 0 && k.toplevel {
			if share = shares(sent[StatementKey(d.Query)], names); share != nil {
				d.AttributedBy = "engine"
				byEngine++
			}
		}
		if share == nil {
			if share = shares(seen[k.queryID], names); share != nil {
				d.AttributedBy = "samples"
				bySamples++
			}
		}
		full := d.Query
		d.Query = cutText(d.Query, statementText)
		if share != nil {
			d.Operations = map[string]float64{}
			for name, f := range share {
				d.Operations[name] = round3(f)
			}
			out.AttributedCalls += d.Calls
		} else {
			share = map[string]float64{"": 1}
			if observer[StatementKey(full)] {
				out.ObserverCalls += d.Calls
			} else {
				out.OtherCalls += d.Calls
			}
		}
		for name, f := range share {
			o := opOf(name)
			o.Statements++
			o.Calls += f * float64(d.Calls)
			o.PlanMs += f * d.PlanMs
			o.ExecMs += f * d.ExecMs
			o.SharedBlks += f * float64(d.SharedHit+d.SharedRead)
			o.TempBlks += f * float64(d.TempRead+d.TempWritten)
		}
		all = append(all, d)
	}
	out.Total.PlanMs, out.Total.ExecMs = round3(out.Total.PlanMs), round3(out.Total.ExecMs)
	sort.Slice(all, func(i, j int) bool {
		ti, tj := all[i].PlanMs+all[i].ExecMs, all[j].PlanMs+all[j].ExecMs
		if ti != tj {
			return ti > tj
		}
		return all[i].QueryID < all[j].QueryID
	})
	out.Top = append(out.Top, all[:min(len(all), TopStatements)]...)
	for _, o := range ops {
		o.Calls, o.PlanMs, o.ExecMs = math.Round(o.Calls), round3(o.PlanMs), round3(o.ExecMs)
		o.SharedBlks, o.TempBlks = math.Round(o.SharedBlks), math.Round(o.TempBlks)
		out.Operations = append(out.Operations, *o)
	}
	sort.Slice(out.Operations, func(i, j int) bool {
		oi, oj := out.Operations[i], out.Operations[j]
		if (oi.Operation == "") != (oj.Operation == "") {
			return oj.Operation == ""
		}
		if ti, tj := oi.PlanMs+oi.ExecMs, oj.PlanMs+oj.ExecMs; ti != tj {
			return ti > tj
		}
		return oi.Operation < oj.Operation
	})
	out.Attribution = fmt.Sprintf("%d statements attributed to key operations by the texts the engine saw each send, %d by samples of pg_stat_activity, %d not attributed",
		byEngine, bySamples, out.Count-byEngine-bySamples)
	var notes []string
	if !out.TrackPlanning {
		notes = append(notes, "plan times need pg_stat_statements.track_planning = on (ALTER SYSTEM SET pg_stat_statements.track_planning = on; SELECT pg_reload_conf())")
	}
	if out.Evicted > 0 {
		notes = append(notes, fmt.Sprintf("pg_stat_statements evicted %d entries during the run (raise pg_stat_statements.max): their figures are missing", out.Evicted))
	}
	out.Note = strings.Join(notes, "; ")
	return out
}

// shares turns counts per operation index into shares per operation name
// (summing to 1), nil when there are none.
func shares[N int | int64](counts map[int]N, names []string) map[string]float64 {
	var total N
	for op, n := range counts {
		if op >= 0 && op < len(names) {
			total += n
		}
	}
	if total <= 0 {
		return nil
	}
	out := map[string]float64{}
	for op, n := range counts {
		if op >= 0 && op < len(names) {
			out[names[op]] += float64(n) / float64(total)
		}
	}
	return out
}

// cutText is q cut to at most n characters, as the server's left(q, n).
func cutText(q string, n int) string {
	i := 0
	for at := range q {
		if i == n {
			return q[:at]
		}
		i++
	}
	return q
}
