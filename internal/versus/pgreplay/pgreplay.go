// Package pgreplay compares `erplab replay` with pgreplay 1.2 (Laurenz
// Albe's PostgreSQL log replayer, Debian package pgreplay) on the same
// csvlog in one run: in every round each tool replays the log onto a
// fresh copy of the same template database, one after the other in a
// rotated order, at unlimited speed (pgreplay has no such setting: -s
// 1000000 makes every statement due at once; erplab --speed 0, with
// --order none, each session on its own schedule as pgreplay, and with
// its default --order gates). The comparison is statements per second
// (statements / the process's wall time, reading the log included, as a
// user waits for it) and the client CPU per statement (user + system time
// of the replaying process from getrusage(2), divided by its statements),
// both as ratios erplab / pgreplay with their spread over the rounds.
// Replays at the captured pace (speed 1) then give the lag behind
// schedule: erplab's own p50/p99/max, pgreplay's "Maximum lag behind
// schedule" (whole seconds, its only lag figure).
//
// pgreplay connects with the user and database each log line names, so
// the log is first rewritten (encoding/csv) with the copy's database and
// the --dsn user in every line that names them; both tools read that
// rewritten log.
package pgreplay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/erplab/erplab/internal/versus/measure"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/replay"
	"github.com/erplab/erplab/internal/results"
)

// ErrNoPgreplay is returned by Find when the binary is missing.
var ErrNoPgreplay = errors.New("pgreplay not found on PATH (Debian: apt-get install pgreplay)")

// Find returns the pgreplay binary's path or ErrNoPgreplay.
func Find() (string, error) {
	if p, err := exec.LookPath("pgreplay"); err == nil {
		return p, nil
	}
	return "", ErrNoPgreplay
}

// Unlimited is the -s given to pgreplay for unlimited speed: a log of a
// day is then due within a tenth of a second.
const Unlimited = "1000000"

// Settings are the server settings of a log both tools replay (pgreplay's
// manual page and erplab replay --help), one per line as in
// postgresql.conf.
const Settings = `logging_collector = on
log_destination = 'csvlog'           # read with pgreplay -c
lc_messages = 'C'                    # pgreplay and erplab read English messages
log_statement = 'all'
log_min_duration_statement = 0       # optional: durations for erplab's --order gates
log_connections = on
log_disconnections = on
log_min_messages = error             # pgreplay: error or higher (log, fatal, panic)
log_min_error_statement = log        # pgreplay: log or higher (fatal, panic)`

// The tools compared.
const (
	Pgreplay    = "pgreplay"
	ErplabNone  = "erplab --order none"
	ErplabGates = "erplab --order gates"
)

// Tools are the replayers of a round, in their first round's order.
var Tools = []string{Pgreplay, ErplabNone, ErplabGates}

// Options say what to compare.
type Options struct {
	// DSN of the server (libpq key=value or URL) where the copies are
	// made; both tools connect as its user. Its password reaches them in
	// PGPASSWORD, never on a command line.
	DSN string
	// Template is the database each replay starts from (a copy taken
	// before the logged workload ran).
	Template string
	// Logs are the csvlog files, in order.
	Logs []string
	// Pgreplay and Erplab are the two tools' executables.
	Pgreplay, Erplab string
	// Rounds of unlimited-speed replays (at least 1), each tool once per
	// round in a rotated order.
	Rounds int
	// LagRuns are the replays of each tool at speed 1 after the rounds
	// (0: none).
	LagRuns int
	// Timeout ends a replay that has not finished (0: none): the copy's
	// sessions are noted (Measurement.Stuck), then the tool is
	// interrupted (SIGINT) and killed 10 s later.
	Timeout time.Duration
	// Dir receives the rewritten log and erplab's results.
	Dir string
	// Progress, when not nil, is told which replay starts.
	Progress func(format string, args ...any)
}

// Measurement is one replay by one tool.
type Measurement struct {
	Tool  string
	Round int     // 0-based; the lag runs count apart
	Speed float64 // 0: unlimited
	// Statements replayed and those that failed (pgreplay: "SQL
	// statements executed", its preparations apart; erplab:
	// extra.replay statements, prepares apart). -1 when the tool ended
	// without its report (killed at the timeout).
	Statements, Errors int64
	// Wall is the process's wall time, CPU its user + system time.
	Wall, CPU time.Duration
	// Own is the tool's own figure of its run time: pgreplay's "Total run
	// time" (parsing included: it reads the log as it replays), erplab's
	// replay from start to end (after reading the whole log).
	Own time.Duration
	// Lag behind schedule at speed > 0, ms; LagQuantiles false when only
	// LagMax is known (pgreplay, in whole seconds).
	LagP50, LagP99, LagMax float64
	LagQuantiles           bool
	// TimedOut: the replay did not end within Options.Timeout; Stuck is
	// what the copy's sessions were doing then.
	TimedOut bool
	Stuck    string
	// PeakRSS and PeakAnon are the process's peak resident size and the
	// largest anonymous part seen, bytes (measure.Usage).
	PeakRSS, PeakAnon int64
}

// Rate is statements per second of wall time (0 without statements).
func (m Measurement) Rate() float64 {
	if m.Statements <= 0 || m.Wall <= 0 {
		return 0
	}
	return float64(m.Statements) / m.Wall.Seconds()
}

// CPUPerStmt is the client CPU per statement in µs (0 without
// statements).
func (m Measurement) CPUPerStmt() float64 {
	if m.Statements <= 0 {
		return 0
	}
	return float64(m.CPU.Microseconds()) / float64(m.Statements)
}

// Report is a benchmark's measurements.
type Report struct {
	// Log says what was replayed: lines and sessions of the rewritten log.
	LogLines int
	// Unlimited are the rounds' replays, Lag those at speed 1.
	Unlimited, Lag []Measurement
}

func (o Options) say(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

// Run replays the log with every tool, Rounds times at unlimited speed
// and LagRuns times at speed 1, each replay onto a fresh copy of the
// template dropped after it. It returns what was measured so far with the
// first error: a tool that fails (not a timeout), the copy refused, ctx
// cancelled.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Rounds < 1 || opts.LagRuns < 0 || opts.Timeout < 0 {
		return nil, fmt.Errorf("pgreplay bench: rounds must be >= 1 (got %d), lag runs and the timeout not negative", opts.Rounds)
	}
	if opts.Template == "" || len(opts.Logs) == 0 {
		return nil, errors.New("pgreplay bench: a template database and a log are needed")
	}
	t, err := newTarget(opts.DSN, opts.Template)
	if err != nil {
		return nil, err
	}
	log := filepath.Join(opts.Dir, "replayed.csv")
	rep := &Report{}
	if rep.LogLines, err = rewriteLog(opts.Logs, log, t.copyDB, t.user); err != nil {
		return nil, err
	}
	n := 0
	one := func(tool string, round int, speed float64) (Measurement, error) {
		opts.say("%-20s round %d, speed %s", tool, round+1, speedName(speed))
		n++
		return t.replay(ctx, opts, log, tool, speed, n)
	}
	for round := range opts.Rounds {
		for i := range Tools {
			tool := Tools[(round+i)%len(Tools)]
			m, err := one(tool, round, 0)
			if err != nil {
				return rep, err
			}
			m.Round = round
			rep.Unlimited = append(rep.Unlimited, m)
		}
	}
	for run := range opts.LagRuns {
		for i := range Tools {
			m, err := one(Tools[(run+i)%len(Tools)], run, 1)
			if err != nil {
				return rep, err
			}
			m.Round = run
			rep.Lag = append(rep.Lag, m)
		}
	}
	return rep, nil
}

func speedName(s float64) string {
	if s == 0 {
		return "unlimited"
	}
	return strconv.FormatFloat(s, 'g', -1, 64)
}

// target is the server side: where copies are made and how each tool
// reaches them.
type target struct {
	admin    string // a DSN of a database other than the template
	template string
	copyDB   string
	user     string
	// erplabDSN connects to the copy without a password; env carries it.
	erplabDSN string
	env       []string
	// host and port for pgreplay's -h and -p; pgEnv its environment.
	host  string
	port  uint16
	pgEnv []string
}

func newTarget(dsn, template string) (*target, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgreplay bench: %s", conninfo.Describe(err))
	}
	t := &target{admin: dsn, template: template, user: cfg.User, host: cfg.Host, port: cfg.Port,
		copyDB: "erplab_vs_pgreplay_" + strings.ReplaceAll(time.Now().UTC().Format("20060102_150405.000"), ".", "_")}
	if cfg.Database == template {
		t.admin = withDatabase(dsn, "postgres")
	}
	bare, env, err := conninfo.Split(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgreplay bench: %w", err)
	}
	t.erplabDSN, t.env = withDatabase(bare, t.copyDB), env
	// pgreplay 1.2 takes host, port and one password; libpq reads the
	// password (pgx found it in the DSN or a passfile) and the TLS mode
	// from the environment.
	if cfg.Password != "" {
		t.pgEnv = append(t.pgEnv, "PGPASSWORD="+cfg.Password)
	}
	if cfg.TLSConfig == nil {
		t.pgEnv = append(t.pgEnv, "PGSSLMODE=disable")
	}
	return t, nil
}

// withDatabase is dsn connecting to database db: a URL with its path
// replaced, else the key=value string with dbname appended (the last one
// wins in libpq and pgx).
func withDatabase(dsn, db string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			u.Path = "/" + db
			return u.String()
		}
	}
	return strings.TrimSpace(dsn + " dbname=" + conninfo.QuoteValue(db))
}

// exec runs one statement on a connection of its own.
func (t *target) exec(ctx context.Context, q string) error {
	conn, err := conninfo.Connect(ctx, t.admin, "erplab-replay-bench", nil)
	if err != nil {
		return fmt.Errorf("pgreplay bench: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("pgreplay bench: %s", conninfo.Describe(err))
	}
	return nil
}

// replay makes the copy, runs tool on it and drops it.
func (t *target) replay(ctx context.Context, opts Options, log, tool string, speed float64, n int) (Measurement, error) {
	db := pgx.Identifier{t.copyDB}.Sanitize()
	if err := t.exec(ctx, "CREATE DATABASE "+db+" TEMPLATE "+pgx.Identifier{t.template}.Sanitize()); err != nil {
		return Measurement{}, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := t.exec(dctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			opts.say("warning: %v", err)
		}
	}()
	if tool == Pgreplay {
		return t.runPgreplay(ctx, opts, log, speed)
	}
	return t.runErplab(ctx, opts, log, tool, speed, n)
}

func (t *target) runPgreplay(ctx context.Context, opts Options, log string, speed float64) (Measurement, error) {
	s := Unlimited
	if speed > 0 {
		s = strconv.FormatFloat(speed, 'f', -1, 64)
	}
	args := []string{"-c", "-s", s}
	if t.host != "" {
		args = append(args, "-h", t.host)
	}
	if t.port != 0 {
		args = append(args, "-p", strconv.Itoa(int(t.port)))
	}
	out, m, err := t.measure(ctx, opts, opts.Pgreplay, append(args, log), t.pgEnv)
	m.Tool, m.Speed = Pgreplay, speed
	if m.TimedOut {
		m.Statements, m.Errors = -1, -1
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("pgreplay: %w: %s", err, lastLines(out))
	}
	if err := parsePgreplay(out, &m); err != nil {
		return m, fmt.Errorf("pgreplay: %w: %s", err, lastLines(out))
	}
	return m, nil
}

func (t *target) runErplab(ctx context.Context, opts Options, log, tool string, speed float64, n int) (Measurement, error) {
	order := "none"
	if tool == ErplabGates {
		order = "gates"
	}
	path := filepath.Join(opts.Dir, fmt.Sprintf("erplab-%d.json", n))
	args := []string{"replay", log, "--from", "pglog", "--dsn", t.erplabDSN, "--force",
		"--speed", strconv.FormatFloat(speed, 'f', -1, 64), "--order", order, "--out", path}
	out, m, err := t.measure(ctx, opts, opts.Erplab, args, t.env)
	m.Tool, m.Speed = tool, speed
	if err != nil && !m.TimedOut {
		return m, fmt.Errorf("erplab replay: %w: %s", err, lastLines(out))
	}
	doc, rerr := results.Read(path)
	if rerr != nil {
		if m.TimedOut { // killed before it wrote its results
			m.Statements, m.Errors = -1, -1
			return m, nil
		}
		return m, fmt.Errorf("erplab replay: %w", rerr)
	}
	var f replay.Fidelity
	if err := json.Unmarshal(doc.Extra["replay"], &f); err != nil {
		return m, fmt.Errorf("erplab replay: extra.replay of %s: %w", path, err)
	}
	m.Statements, m.Errors, m.Own = f.Statements, f.Failed, doc.EndedAt.Sub(doc.StartedAt)
	if f.Lag != nil {
		m.LagP50, m.LagP99, m.LagMax, m.LagQuantiles = f.Lag.P50, f.Lag.P99, f.Lag.Max, true
	}
	return m, nil
}

// interruptGrace is how long a tool interrupted at the timeout has to
// end before it is killed.
const interruptGrace = 10 * time.Second

// measure runs a tool to completion and takes its CPU from the kernel's
// accounting of the child (wait4's rusage, as Go's ProcessState reports
// it). env (the password) is added to this process's environment: no
// password goes in args. At the timeout the copy's sessions are noted
// and the tool interrupted, then killed.
func (t *target) measure(ctx context.Context, opts Options, bin string, args, env []string) ([]byte, Measurement, error) {
	var m Measurement
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if opts.Timeout > 0 {
		rctx, cancel = context.WithTimeout(ctx, opts.Timeout)
	}
	defer cancel()
	cmd := exec.CommandContext(rctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.WaitDelay = interruptGrace
	cmd.Cancel = func() error {
		if ctx.Err() == nil { // the timeout, not the caller
			m.TimedOut = true
			m.Stuck = t.sessions(ctx)
		}
		return cmd.Process.Signal(os.Interrupt)
	}
	u, err := measure.RunUsage(ctx, cmd)
	m.Wall, m.CPU, m.PeakRSS, m.PeakAnon = u.Wall, u.CPU, u.PeakRSS, u.PeakAnon
	return buf.Bytes(), m, err
}

// sessions says what the copy's sessions are doing: "2 active (Lock/
// transactionid), 1 idle in transaction".
func (t *target) sessions(ctx context.Context) string {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	conn, err := conninfo.Connect(qctx, t.admin, "erplab-replay-bench", nil)
	if err != nil {
		return "sessions unknown: " + err.Error()
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(qctx, `SELECT count(*), coalesce(state, ''), coalesce(wait_event_type || '/' || wait_event, '')
		FROM pg_stat_activity WHERE datname = $1 GROUP BY 2, 3 ORDER BY 1 DESC, 2, 3`, t.copyDB)
	if err != nil {
		return "sessions unknown: " + conninfo.Describe(err)
	}
	var parts []string
	for rows.Next() {
		var n int64
		var state, wait string
		if err := rows.Scan(&n, &state, &wait); err != nil {
			return "sessions unknown: " + err.Error()
		}
		s := fmt.Sprintf("%d %s", n, state)
		if wait != "" {
			s += " (" + wait + ")"
		}
		parts = append(parts, s)
	}
	if rows.Err() != nil || len(parts) == 0 {
		return "no session in the copy"
	}
	return strings.Join(parts, ", ")
}

// parsePgreplay reads pgreplay's replay statistics (database.c,
// print_replay_statistics): "SQL statements executed: N", "(E or x% of
// these completed with error)", "Maximum lag behind schedule: N seconds".
func parsePgreplay(out []byte, m *Measurement) error {
	sc := bufio.NewScanner(bytes.NewReader(out))
	var haveStmts bool
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "SQL statements executed: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return fmt.Errorf("statement count %q: %w", v, err)
			}
			m.Statements, haveStmts = n, true
		}
		if v, ok := strings.CutPrefix(line, "("); ok && strings.Contains(v, " of these completed with error") {
			if f := strings.Fields(v); len(f) > 0 {
				m.Errors, _ = strconv.ParseInt(f[0], 10, 64)
			}
		}
		if v, ok := strings.CutPrefix(line, "Total run time:"); ok {
			m.Own = runTime(v)
		}
		if v, ok := strings.CutPrefix(line, "Maximum lag behind schedule: "); ok {
			if f := strings.Fields(v); len(f) > 0 {
				s, _ := strconv.ParseFloat(f[0], 64)
				m.LagMax = s * 1000
			}
		}
	}
	if !haveStmts {
		return errors.New("no \"SQL statements executed\" in pgreplay's statistics")
	}
	return nil
}

// runTime reads pgreplay's " [H hours] [M minutes] S.SSS seconds".
func runTime(v string) time.Duration {
	f := strings.Fields(v)
	var d time.Duration
	for i := 0; i+1 < len(f); i += 2 {
		n, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0
		}
		switch f[i+1] {
		case "hours":
			d += time.Duration(n * float64(time.Hour))
		case "minutes":
			d += time.Duration(n * float64(time.Minute))
		case "seconds":
			d += time.Duration(n * float64(time.Second))
		}
	}
	return d
}

// lastLines are the last three lines of a tool's output, for an error.
func lastLines(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], " / ")
}
