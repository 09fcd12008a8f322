package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Sources of the xmin-horizon rule.
const (
	srcVacuumHorizon = "https://www.postgresql.org/docs/current/routine-vacuuming.html#VACUUM-FOR-SPACE-RECOVERY (dead rows still visible to an open snapshot are kept)"
	srcPreparedXacts = "https://www.postgresql.org/docs/current/view-pg-prepared-xacts.html"
	srcReplSlots     = "https://www.postgresql.org/docs/current/view-pg-replication-slots.html"
	srcHotStandbyFB  = "https://www.postgresql.org/docs/current/runtime-config-replication.html#GUC-HOT-STANDBY-FEEDBACK"
	srcProcArray     = "src/backend/storage/ipc/procarray.c (ComputeXidHorizons: backends' xmin and xid, prepared transactions, replication slots' xmin and catalog_xmin)"
)

// Thresholds of the horizon rule: a holder blocks dead-tuple removal
// when its xmin is at least horizonAgeWarn transactions old, or (a
// backend or a prepared transaction) it has been open at least
// horizonHoldWarnS seconds.
const (
	horizonAgeWarn   = 10_000
	horizonHoldWarnS = 60.0
)

// holder is one thing that holds back the xmin horizon: a backend's
// snapshot or transaction, a prepared transaction, a replication slot,
// or a walsender reporting a standby's xmin (hot_standby_feedback).
type holder struct {
	// Kind is "backend", "walsender", "prepared" or "slot".
	Kind string `json:"kind"`
	// PID is the backend's (or the slot's active) process id, 0 if none.
	PID int `json:"pid,omitempty"`
	// Name is the application_name (backends, walsenders: the standby's
	// name), the gid (prepared) or the slot name.
	Name     string `json:"name"`
	User     string `json:"user,omitempty"`
	Database string `json:"database,omitempty"`
	// State is the backend's state, or for a slot "active"/"inactive"
	// and its type.
	State string `json:"state,omitempty"`
	// Which is the column that holds: backend_xmin, backend_xid,
	// transaction, xmin, catalog_xmin.
	Which string `json:"which"`
	// XminAge is age() of that column, transactions.
	XminAge int64 `json:"xmin_age"`
	// AgeS is the seconds since xact_start or the PREPARE; -1 unknown
	// (slots).
	AgeS  float64 `json:"age_s"`
	Query string  `json:"query,omitempty"`
}

// horizon is what holds the xmin horizon back, oldest first.
type horizon struct {
	Holders []holder `json:"holders"`
}

// blocks reports whether the holder keeps dead tuples that vacuum would
// otherwise remove (see horizonAgeWarn, horizonHoldWarnS).
func (h holder) blocks() bool {
	return h.XminAge >= horizonAgeWarn || (h.AgeS >= horizonHoldWarnS && (h.Kind == "backend" || h.Kind == "prepared"))
}

// String names the holder for evidence and summaries.
func (h holder) String() string {
	age := ""
	if h.AgeS >= 0 {
		age = ", open " + fmtDur(secs(h.AgeS))
	}
	switch h.Kind {
	case "prepared":
		return fmt.Sprintf("prepared transaction '%s' (owner %s, database %s%s), %s %d transactions old", h.Name, h.User, h.Database, age, h.Which, h.XminAge)
	case "slot":
		return fmt.Sprintf("replication slot '%s' (%s, database %s), %s %d transactions old", h.Name, h.State, or(h.Database, "none"), h.Which, h.XminAge)
	case "walsender":
		return fmt.Sprintf("walsender pid %d for standby '%s' (hot_standby_feedback), %s %d transactions old", h.PID, h.Name, h.Which, h.XminAge)
	}
	return fmt.Sprintf("pid %d (application '%s', user %s, database %s, %s%s), %s %d transactions old", h.PID, h.Name, h.User, h.Database, h.State, age, h.Which, h.XminAge)
}

// fix returns the commands that release the holder.
func (h holder) fix() []string {
	switch h.Kind {
	case "prepared":
		return []string{
			fmt.Sprintf("-- connected to database %s, after checking with its owner which outcome is right:", h.Database),
			fmt.Sprintf("ROLLBACK PREPARED %s;   -- or COMMIT PREPARED %s;", quoteLit(h.Name), quoteLit(h.Name)),
			"ALTER SYSTEM SET max_prepared_transactions = 0;   -- restart; only when no transaction manager uses two-phase commit",
		}
	case "slot":
		return []string{
			fmt.Sprintf("SELECT pg_drop_replication_slot(%s);   -- when no consumer will read it again; else make the consumer catch up", quoteLit(h.Name)),
			"# a logical slot's catalog_xmin holds back the cleanup of pg_class, pg_attribute and the other catalogs in every database",
		}
	case "walsender":
		return []string{
			fmt.Sprintf("# long queries on standby '%s' hold this primary's horizon through hot_standby_feedback: end them there,", h.Name),
			"# or on that standby: ALTER SYSTEM SET hot_standby_feedback = off (its queries may then be cancelled by replication conflicts)",
		}
	}
	return []string{
		fmt.Sprintf("SELECT pg_terminate_backend(%d);   -- ends its transaction (%s)", h.PID, or(h.Name, "no application_name")),
		"ALTER SYSTEM SET idle_in_transaction_session_timeout = '5min'; SELECT pg_reload_conf();",
	}
}

func quoteLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// horizonSQL lists the holders of the xmin horizon, oldest first:
// backends other than this one with a snapshot (backend_xmin) or an xid
// (autovacuum workers are left out: the horizon ignores VACUUM's own
// snapshot), prepared transactions and replication slots.
const horizonSQL = `SELECT * FROM (
SELECT CASE WHEN a.backend_type = 'walsender' THEN 'walsender' ELSE 'backend' END, a.pid, coalesce(a.application_name, ''),
       coalesce(a.usename::text, ''), coalesce(a.datname::text, ''), coalesce(a.state, ''),
       CASE WHEN coalesce(pg_catalog.age(a.backend_xid), -1) >= coalesce(pg_catalog.age(a.backend_xmin), -1) THEN 'backend_xid' ELSE 'backend_xmin' END,
       greatest(pg_catalog.age(a.backend_xid), pg_catalog.age(a.backend_xmin))::int8,
       coalesce(extract(epoch FROM now() - a.xact_start), -1)::float8, left(coalesce(a.query, ''), 200)
FROM pg_catalog.pg_stat_activity a
WHERE a.pid <> pg_catalog.pg_backend_pid() AND a.backend_type <> 'autovacuum worker'
  AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
UNION ALL
SELECT 'prepared', 0, p.gid, p.owner::text, p.database::text, '', 'transaction', pg_catalog.age(p.transaction)::int8,
       extract(epoch FROM now() - p.prepared)::float8, ''
FROM pg_catalog.pg_prepared_xacts p
UNION ALL
SELECT 'slot', coalesce(s.active_pid, 0), s.slot_name::text, '', coalesce(s.database::text, ''),
       CASE WHEN s.active THEN 'active ' ELSE 'inactive ' END || s.slot_type,
       CASE WHEN coalesce(pg_catalog.age(s.catalog_xmin), -1) > coalesce(pg_catalog.age(s.xmin), -1) THEN 'catalog_xmin' ELSE 'xmin' END,
       greatest(pg_catalog.age(s.xmin), pg_catalog.age(s.catalog_xmin))::int8, -1::float8, ''
FROM pg_catalog.pg_replication_slots s
WHERE s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL
) h ORDER BY 8 DESC, 2`

// horizon loads the holders once (or returns the recorded ones).
func (e *env) horizon(ctx context.Context) (*horizon, error) {
	if e.rec != nil {
		if e.rec.Horizon == nil {
			return nil, errNotRecorded("horizon")
		}
		return e.rec.Horizon, nil
	}
	if e.hz != nil {
		return e.hz, nil
	}
	rows, err := e.conn.Query(ctx, horizonSQL)
	if err != nil {
		return nil, err
	}
	hs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (holder, error) {
		var h holder
		err := r.Scan(&h.Kind, &h.PID, &h.Name, &h.User, &h.Database, &h.State, &h.Which, &h.XminAge, &h.AgeS, &h.Query)
		return h, err
	})
	if err != nil {
		return nil, err
	}
	e.hz = &horizon{Holders: hs}
	return e.hz, nil
}

// blocker is the oldest holder that blocks dead-tuple removal, or nil.
func (h *horizon) blocker() *holder {
	if h == nil {
		return nil
	}
	for i := range h.Holders {
		if h.Holders[i].blocks() {
			return &h.Holders[i]
		}
	}
	return nil
}

// horizonEvidence lists up to maxListed holders.
func (h *horizon) evidence() []Evidence {
	var ev []Evidence
	for i, x := range h.Holders {
		if i == maxListed {
			ev = append(ev, Evidence{Text: fmt.Sprintf("... and %d more", len(h.Holders)-maxListed), From: "pg_stat_activity, pg_prepared_xacts, pg_replication_slots"})
			break
		}
		from := map[string]string{"backend": "pg_stat_activity", "walsender": "pg_stat_activity (walsender)", "prepared": "pg_prepared_xacts", "slot": "pg_replication_slots"}[x.Kind]
		ev = append(ev, Evidence{Text: "xmin horizon holder: " + x.String(), From: from})
	}
	return ev
}

func init() {
	register(Check{ID: "xmin-horizon", Title: "What holds back the xmin horizon", order: secCatalog + 30, run: checkXminHorizon,
		Rule:    "warning when a backend (backend_xmin/backend_xid), prepared transaction, replication slot (xmin/catalog_xmin) or walsender (hot_standby_feedback) is >= 10,000 transactions old, or a backend or prepared transaction has been open >= 1 min; info on a standby sending hot_standby_feedback",
		Why:     "Vacuum keeps every dead row that the oldest snapshot might still see; while it is held, VACUUM of a bloated catalog or table removes nothing.",
		Sources: []string{srcVacuumHorizon, srcProcArray, srcPreparedXacts, srcReplSlots, srcHotStandbyFB}})
}

func checkXminHorizon(ctx context.Context, e *env) result {
	hz, err := e.horizon(ctx)
	if err != nil {
		return failed(err)
	}
	ev := hz.evidence()
	hsf := e.show("hot_standby_feedback")
	ev = append(ev, Evidence{Text: "hot_standby_feedback = " + or(hsf, "(not visible)") + ", in recovery: " + fmt.Sprint(e.srv.InRecovery), From: "pg_settings"})
	m := map[string]float64{"holders": float64(len(hz.Holders)), "oldest_xmin_age": 0}
	if len(hz.Holders) > 0 {
		m["oldest_xmin_age"] = float64(hz.Holders[0].XminAge)
	}
	b := hz.blocker()
	if b == nil {
		if e.srv.InRecovery && hsf == "on" {
			return result{sev: Info, summary: "this standby sends hot_standby_feedback: its long queries hold back the primary's xmin horizon (and catalog cleanup there)", evidence: ev, metrics: m}
		}
		if len(hz.Holders) == 0 {
			return result{sev: OK, summary: "nothing holds the xmin horizon back (no open snapshot, prepared transaction or slot xmin)", evidence: ev, metrics: m}
		}
		return result{sev: OK, summary: fmt.Sprintf("xmin horizon %d transactions behind (%s): not long enough to keep dead tuples of note", hz.Holders[0].XminAge, hz.Holders[0].Kind), evidence: ev, metrics: m}
	}
	m["blocker_xmin_age"] = float64(b.XminAge)
	var fix []string
	n := 0
	for _, h := range hz.Holders {
		if h.blocks() && n < maxListed {
			n++
			fix = append(fix, "# "+h.Kind+" "+or(h.Name, fmt.Sprint(h.PID))+":")
			fix = append(fix, h.fix()...)
		}
	}
	m["blocking_holders"] = float64(n)
	more := ""
	if n > 1 {
		more = fmt.Sprintf(" (and %d more holders behind it)", n-1)
	}
	return result{sev: Warning, summary: "the xmin horizon is held back by " + b.String() + more + ": vacuum keeps every dead tuple newer than it, catalogs included, and VACUUM removes nothing until it ends",
		evidence: ev, metrics: m, fix: fix}
}
