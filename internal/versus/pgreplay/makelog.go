package pgreplay

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
)

// ServerSettings are what a server started for MakeLog needs from its
// start (logging_collector takes a restart): a csvlog in C with every
// connection and disconnection, the message levels pgreplay reads, no
// rotation by size. The statements are logged per database (MakeLog), so
// the rest of the server's work is not.
func ServerSettings() map[string]string {
	return map[string]string{
		"logging_collector": "on", "log_destination": "csvlog", "log_filename": "erplab-replay.log",
		"log_rotation_size": "0", "lc_messages": "C", "log_connections": "on", "log_disconnections": "on",
		"log_min_messages": "error", "log_min_error_statement": "log",
	}
}

// Workload is a pgbench run whose csvlog is replayed: its name in the
// table, pgbench's arguments (without the connection) and its sessions.
type Workload struct {
	Name     string
	Args     []string
	Sessions int
}

// Workloads are the logs the generator table replays: pgbench's
// select-only and simple-update in the prepared protocol on 4 clients, tx
// transactions each (0: 1,000 select-only, 300 simple-update). Not
// tpcb-like: its 4 sessions update the one branch row of scale 1, and
// pgreplay, which sends the log's statements in order on one thread,
// then waits for ever on a session blocked by one whose next statement
// it has not sent (measured: 3 sessions waiting on a lock, 1 idle in
// transaction, after 5 minutes).
func Workloads(tx int) []Workload {
	s, t := 1000, 300
	if tx > 0 {
		s, t = tx, tx
	}
	w := func(script string, n int) Workload {
		return Workload{Name: script, Sessions: 4,
			Args: []string{"-n", "-b", script, "-M", "prepared", "-c", "4", "-j", "1", "-t", strconv.Itoa(n)}}
	}
	return []Workload{w("select-only", s), w("simple-update", t)}
}

// LogOptions say where and how a log is made.
type LogOptions struct {
	// DSN of a superuser on a server started with ServerSettings (the
	// log is read with pg_read_binary_file).
	DSN string
	// Pgbench is pgbench's executable: it makes the tables and runs the
	// workload.
	Pgbench string
	// Dir receives the log.
	Dir string
	// Scale of the pgbench tables.
	Scale int
}

// Log is a csvlog made by MakeLog and the template to replay it onto.
type Log struct {
	Workload Workload
	Path     string
	Template string
	// Lines of the log (records of the workload's database).
	Lines int
}

// MakeLog makes database erplab_log_NAME with pgbench tables at
// opts.Scale, copies it into the template erplab_log_NAME_before, makes
// the new sessions of the first log every statement with its duration,
// runs the workload on it and writes its records of the server's csvlog
// (those of that database, from the workload's start until every session
// it opened has ended) to opts.Dir/NAME.csv. The databases stay (the
// template is replayed onto); Drop removes them.
func MakeLog(ctx context.Context, opts LogOptions, w Workload) (Log, error) {
	src := "erplab_log_" + strings.ReplaceAll(w.Name, "-", "_")
	l := Log{Workload: w, Template: src + "_before", Path: filepath.Join(opts.Dir, w.Name+".csv")}
	conn, err := conninfo.Connect(ctx, opts.DSN, "erplab-vs-pgreplay", nil)
	if err != nil {
		return l, fmt.Errorf("replay log: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	db, tmpl := pgx.Identifier{src}.Sanitize(), pgx.Identifier{l.Template}.Sanitize()
	for _, q := range []string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)", "DROP DATABASE IF EXISTS " + tmpl, "CREATE DATABASE " + db} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return l, fmt.Errorf("replay log: %s", conninfo.Describe(err))
		}
	}
	dsn, env, err := conninfo.Split(withDatabase(opts.DSN, src))
	if err != nil {
		return l, fmt.Errorf("replay log: %w", err)
	}
	if err := runPgbench(ctx, opts.Pgbench, env, "-i", "-q", "-s", strconv.Itoa(max(opts.Scale, 1)), dsn); err != nil {
		return l, err
	}
	var file string
	var from int64
	for _, q := range []string{"CREATE DATABASE " + tmpl + " TEMPLATE " + db,
		"ALTER DATABASE " + db + " SET log_statement = 'all'", "ALTER DATABASE " + db + " SET log_min_duration_statement = 0"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return l, fmt.Errorf("replay log: %s", conninfo.Describe(err))
		}
	}
	err = conn.QueryRow(ctx, "SELECT f, (pg_stat_file(f)).size FROM pg_current_logfile('csvlog') f").Scan(&file, &from)
	if err != nil {
		return l, fmt.Errorf("replay log: the server writes no csvlog (logging_collector and log_destination, ServerSettings): %s", conninfo.Describe(err))
	}
	if err := runPgbench(ctx, opts.Pgbench, env, append(append([]string(nil), w.Args...), dsn)...); err != nil {
		return l, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var b []byte
		if err := conn.QueryRow(ctx, "SELECT pg_read_binary_file($1, $2, (pg_stat_file($1)).size - $2)", file, from).Scan(&b); err != nil {
			return l, fmt.Errorf("replay log: reading %s: %s", file, conninfo.Describe(err))
		}
		var conns, ends int
		if l.Lines, conns, ends, err = keepDatabase(b, src, l.Path); err != nil {
			return l, err
		}
		if conns >= w.Sessions && conns == ends {
			return l, nil
		}
		if time.Now().After(deadline) {
			return l, fmt.Errorf("replay log: %s: %d connections and %d disconnections of %s after a minute", file, conns, ends, src)
		}
		select {
		case <-ctx.Done():
			return l, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Drop removes MakeLog's databases of l.
func Drop(ctx context.Context, dsn string, l Log) error {
	conn, err := conninfo.Connect(ctx, dsn, "erplab-vs-pgreplay", nil)
	if err != nil {
		return fmt.Errorf("replay log: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, db := range []string{strings.TrimSuffix(l.Template, "_before"), l.Template} {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("replay log: %s", conninfo.Describe(err))
		}
	}
	return nil
}

func runPgbench(ctx context.Context, bin string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("replay log: pgbench %s: %w: %s", args[0], err, lastLines(out))
	}
	return nil
}

// csvlog's message column.
const colMessage = 13

// keepDatabase writes the records of csvlog text b whose database is db
// to path (replacing it) and counts them, and among them the
// connections authorized and the disconnections.
func keepDatabase(b []byte, db, path string) (lines, conns, ends int, err error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("replay log: %w", err)
	}
	w := csv.NewWriter(f)
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	for {
		rec, rerr := r.Read()
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			f.Close()
			return lines, conns, ends, fmt.Errorf("replay log: the server's csvlog: %w", rerr)
		}
		if len(rec) <= colMessage || rec[colDatabase] != db {
			continue
		}
		switch {
		case strings.HasPrefix(rec[colMessage], "connection authorized: "):
			conns++
		case strings.HasPrefix(rec[colMessage], "disconnection: "):
			ends++
		}
		if err := w.Write(rec); err != nil {
			f.Close()
			return lines, conns, ends, fmt.Errorf("replay log: %w", err)
		}
		lines++
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return lines, conns, ends, fmt.Errorf("replay log: %w", err)
	}
	if err := f.Close(); err != nil {
		return lines, conns, ends, fmt.Errorf("replay log: %w", err)
	}
	return lines, conns, ends, nil
}
