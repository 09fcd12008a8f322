package replay

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/capture"
	"github.com/erplab/erplab/internal/pgtest"
	"github.com/erplab/erplab/internal/results"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &srv)) }

// deadline bounds a test's replay: generous, so a loaded machine passes;
// a replay that hangs fails on its status instead of hanging the suite.
const deadline = 3 * time.Minute

// replayOnto runs a replay of events onto a fresh database made by
// schema, returning the result and a pool on that database.
func replayOnto(t *testing.T, schema string, events []capture.Event, opts Options) (*Result, *pgxpool.Pool) {
	t.Helper()
	dsn := srv.NewDatabase(t)
	pool := srv.Pool(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if _, err := pool.Exec(ctx, schema); err != nil {
		t.Fatal(err)
	}
	opts.DSN = dsn
	if opts.Warn == nil {
		opts.Warn = func(s string) { t.Log(s) }
	}
	res, err := Run(ctx, Slice(events), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Doc.Status != "completed" {
		t.Fatalf("status %q, want completed (fidelity %+v)", res.Doc.Status, res.Fidelity)
	}
	if err := results.Validate(res.Doc); err != nil {
		t.Fatalf("results document: %v", err)
	}
	return res, pool
}

// balances reads the tpcb end state: the three balance sums and the
// history rows.
func balances(t *testing.T, pool *pgxpool.Pool) (acc, tel, br, hist int64) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts),
		(SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers),
		(SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches),
		(SELECT count(*) FROM pgbench_history)`).Scan(&acc, &tel, &br, &hist)
	if err != nil {
		t.Fatal(err)
	}
	return acc, tel, br, hist
}

// TestReplayTPCB replays pgbench tpcb-like transactions in four sessions,
// one per protocol (simple; named prepared with OIDs; unnamed with binary
// int4 parameters; prepared with type names) and a COPY: every statement
// replays without an error or a differing row count, and the end state is
// what the statements give (each balance sum is the sum of the deltas,
// the history holds every transaction and the copied rows).
func TestReplayTPCB(t *testing.T) {
	p := newTPCB(15, 1)
	res, pool := replayOnto(t, tpcbSchema, p.events, Options{})
	f := res.Fidelity
	if f.Statements != p.statements || f.Prepares != p.prepares {
		t.Errorf("replayed %d statements and %d prepares, want %d and %d", f.Statements, f.Prepares, p.statements, p.prepares)
	}
	if f.Failed != 0 || len(f.NewErrors) != 0 || f.Skipped != 0 || f.RowsDiffer != 0 {
		t.Errorf("failed %d (new %v), skipped %v, rows differ %d (%v): want none", f.Failed, f.NewErrors, f.SkippedBy, f.RowsDiffer, f.RowDiffs)
	}
	if f.RowsCompared != p.statements {
		t.Errorf("rows compared for %d statements, want %d", f.RowsCompared, p.statements)
	}
	if f.Connections != 5 {
		t.Errorf("%d connections, want 5", f.Connections)
	}
	acc, tel, br, hist := balances(t, pool)
	if acc != p.delta || tel != p.delta || br != p.delta || hist != p.history {
		t.Errorf("end state: balances %d %d %d, history %d; want %d each and %d", acc, tel, br, hist, p.delta, p.history)
	}
	if res.Doc.Totals.Count != p.statements {
		t.Errorf("document counts %d statements, want %d", res.Doc.Totals.Count, p.statements)
	}
}

// TestReplayDocument writes a replay's results and reads them back as
// every erplab command does; the groups are the statements' fingerprints
// with readable names, their captured durations beside the replayed ones.
func TestReplayDocument(t *testing.T) {
	p := newTPCB(3, 2)
	res, _ := replayOnto(t, tpcbSchema, p.events, Options{})
	path := filepath.Join(t.TempDir(), "replay.json")
	if err := res.Doc.WriteFile(path, 0o600); err != nil {
		t.Fatal(err)
	}
	doc, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := doc.Extra["replay"]; !ok {
		t.Fatal("no extra.replay in the document read back")
	}
	var upd *GroupFigures
	for i, g := range res.Fidelity.Groups {
		if g.Name[:min(len(g.Name), 36)] == "UPDATE pgbench_branches SET bbalance" {
			upd = &res.Fidelity.Groups[i]
		}
	}
	if upd == nil {
		t.Fatalf("no group named for UPDATE pgbench_branches in %+v", res.Fidelity.Groups)
	}
	// simple, named, binary, typed: four texts, one fingerprint.
	if upd.By != "fingerprint" || upd.Captured.Count != 12 || upd.Replayed.Count != 12 || upd.Captured.P50 != 0.04 {
		t.Errorf("group %+v: want by fingerprint, 12 captured (p50 0.04 ms) and 12 replayed", *upd)
	}
	if upd.TargetBy != "captured p95" || upd.TargetMs != 1 {
		t.Errorf("group target %v ms by %q, want 1 ms from the captured p95", upd.TargetMs, upd.TargetBy)
	}
}
