package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// useServer points libpq's environment (which both tools read) at a fresh
// database of the test server.
func useServer(t *testing.T) {
	t.Helper()
	dsn := srv.NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGHOST", cfg.Host)
	t.Setenv("PGPORT", strconv.Itoa(int(cfg.Port)))
	t.Setenv("PGUSER", cfg.User)
	t.Setenv("PGDATABASE", cfg.Database)
	t.Setenv("PGOPTIONS", "")
	if pf := passfile(dsn); pf != "" {
		t.Setenv("PGPASSFILE", pf)
	}
}

// skipRun is one tool's run of a skip case.
type skipRun struct {
	tool string
	peerResult
	logs [][]string // the lines of PREFIX.PID, PREFIX.PID.1, ... in thread order
}

// summary figures of pgbench's report
type skipSummary struct {
	processed, skipped int64
	perScript          []int64 // " - number of transactions skipped: N"
}

var (
	processedRe = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	skippedRe   = regexp.MustCompile(`(?m)^number of transactions skipped: (\d+) \((\d+\.\d{3})%\)$`)
	scriptSkRe  = regexp.MustCompile(`(?m)^ - number of transactions skipped: (\d+) \(\d+\.\d{3}%\)$`)
)

func (r *skipRun) summary(t *testing.T) skipSummary {
	t.Helper()
	p := processedRe.FindStringSubmatch(r.stdout)
	s := skippedRe.FindStringSubmatch(r.stdout)
	if p == nil || s == nil {
		t.Fatalf("%s: no processed or skipped line in the report:\n%s", r.tool, r.stdout)
	}
	var out skipSummary
	out.processed, _ = strconv.ParseInt(p[1], 10, 64)
	out.skipped, _ = strconv.ParseInt(s[1], 10, 64)
	total := out.processed + out.skipped // no failures in these scripts
	if want := pct(out.skipped, total, 3); s[2] != want {
		t.Errorf("%s: skipped %s %%, want %s (%d of %d)", r.tool, s[2], want, out.skipped, total)
	}
	for _, m := range scriptSkRe.FindAllStringSubmatch(r.stdout, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		out.perScript = append(out.perScript, n)
	}
	return out
}

// runSkipCase runs args with pgbench 15 (when installed) and erplab, each
// with its -l files read and removed after.
func runSkipCase(t *testing.T, dir string, args []string) []skipRun {
	t.Helper()
	pgbench, _ := findPgbench(t)
	var runs []skipRun
	for _, tool := range []string{"pgbench", "erplab"} {
		var r peerResult
		switch {
		case tool == "erplab":
			r = runErplab(t.Context(), t.TempDir(), args, 0) // its results document apart
		case pgbench != "":
			r = runPgbench(pgbench, dir, args)
		default:
			continue
		}
		if r.status != 0 {
			t.Fatalf("%s %s: exit %d\n%s\n%s", tool, strings.Join(args, " "), r.status, r.stdout, r.stderr)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "skl.*"))
		sort.Strings(files) // PREFIX.PID before PREFIX.PID.1
		run := skipRun{tool: tool, peerResult: r}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(f)
			var lines []string
			if s := strings.TrimSuffix(string(b), "\n"); s != "" {
				lines = strings.Split(s, "\n")
			}
			run.logs = append(run.logs, lines)
		}
		runs = append(runs, run)
	}
	return runs
}

// Skipped transactions (--rate with --latency-limit: an arrival already
// later than the limit is not run) in the report, the -l log lines, the
// aggregate lines and the -P progress lines, for erplab and pgbench 15
// side by side on the same command lines: the same line shapes, and
// counts that agree with each other. A 20 ms \sleep against a 1 ms limit
// at hundreds of arrivals per second makes nearly every arrival due during
// a transaction late: skips happen on every run.
func TestSkippedTransactions(t *testing.T) {
	useServer(t)
	dir := t.TempDir()
	for name, body := range map[string]string{"sleep20": `\sleep 20ms`, "sleep5": `\sleep 5ms`} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prefix := "--log-prefix=" + filepath.Join(dir, "skl")
	sleep20 := filepath.Join(dir, "sleep20")
	sleep5 := filepath.Join(dir, "sleep5")

	t.Run("per-transaction log", func(t *testing.T) {
		// 2 clients x 20 transactions: each one is run or skipped
		args := []string{"-n", "-f", sleep20, "-t", "20", "-c", "2", "-j", "2", "-R", "1000", "-L", "1", "-l", prefix}
		line := regexp.MustCompile(`^([01]) (\d+) (\d+|skipped) 0 \d+ \d{1,6} (\d+)$`)
		for _, r := range runSkipCase(t, dir, args) {
			s := r.summary(t)
			if s.processed+s.skipped != 40 || s.skipped == 0 {
				t.Errorf("%s: %d processed + %d skipped, want 40 with some skipped", r.tool, s.processed, s.skipped)
			}
			if len(r.logs) != 2 {
				t.Fatalf("%s: %d log files, want 2 (one per thread)", r.tool, len(r.logs))
			}
			var run, skipped int64
			for th, lines := range r.logs {
				// a client's transactions are numbered 1..20, skipped ones too
				if len(lines) != 20 {
					t.Errorf("%s: thread %d logged %d transactions, want 20", r.tool, th, len(lines))
				}
				for i, l := range lines {
					m := line.FindStringSubmatch(l)
					if m == nil || m[1] != strconv.Itoa(th) || m[2] != strconv.Itoa(i+1) {
						t.Fatalf("%s: thread %d line %d %q does not match %s", r.tool, th, i+1, l, line)
					}
					if m[3] == "skipped" {
						skipped++
						if m[4] != "0" {
							t.Errorf("%s: skipped line %q has a schedule lag", r.tool, l)
						}
					} else {
						run++
					}
				}
			}
			if run != s.processed || skipped != s.skipped {
				t.Errorf("%s: log has %d run + %d skipped lines, report %d processed + %d skipped", r.tool, run, skipped, s.processed, s.skipped)
			}
			t.Logf("%s: %d processed, %d skipped; thread 0's first lines: %q", r.tool, s.processed, s.skipped, r.logs[0][:3])
		}
	})

	t.Run("aggregate log and retries", func(t *testing.T) {
		args := []string{"-n", "-f", sleep20, "-T", "2", "-c", "2", "-j", "2", "-R", "500", "-L", "1", "--max-tries", "2",
			"-P", "1", "-l", "--aggregate-interval=1", prefix}
		line := regexp.MustCompile(`^\d+( \d+){14}$`)
		progress := regexp.MustCompile(`^progress: \d+\.\d s, \d+\.\d tps, lat \d+\.\d{3} ms stddev \d+\.\d{3}, 0 failed, lag \d+\.\d{3} ms, \d+ skipped, 0 retried, 0 retries$`)
		for _, r := range runSkipCase(t, dir, args) {
			s := r.summary(t)
			for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if !progress.MatchString(l) {
					t.Errorf("%s: progress line %q does not match %s", r.tool, l, progress)
				}
			}
			var cnt, skipped int64
			for th, lines := range r.logs {
				if len(lines) == 0 {
					t.Errorf("%s: thread %d wrote no interval", r.tool, th)
				}
				for _, l := range lines {
					if !line.MatchString(l) {
						t.Fatalf("%s: aggregate line %q does not have 15 integer fields", r.tool, l)
					}
					f := strings.Fields(l)
					n, _ := strconv.ParseInt(f[1], 10, 64)
					k, _ := strconv.ParseInt(f[10], 10, 64)
					cnt += n
					skipped += k
				}
			}
			// pgbench 15 does not write the interval still open at the
			// end (what completed or was skipped after the last full
			// interval is in the report only); erplab writes it
			if skipped == 0 || skipped > s.skipped || cnt > s.processed || (r.tool == "erplab" && (skipped != s.skipped || cnt != s.processed)) {
				t.Errorf("%s: intervals count %d transactions and %d skipped, report %d and %d", r.tool, cnt, skipped, s.processed, s.skipped)
			}
			t.Logf("%s: %d processed, %d skipped; first interval of thread 0: %q", r.tool, s.processed, s.skipped, r.logs[0][0])
		}
	})

	t.Run("progress, per-script report and log", func(t *testing.T) {
		args := []string{"-n", "-f", sleep20, "-f", sleep5, "-T", "2", "-c", "1", "-R", "500", "-L", "1", "-P", "1", "-r", "-l", prefix}
		progress := regexp.MustCompile(`^progress: \d+\.\d s, \d+\.\d tps, lat \d+\.\d{3} ms stddev \d+\.\d{3}, 0 failed, lag \d+\.\d{3} ms, (\d+) skipped$`)
		line := regexp.MustCompile(`^0 \d+ (\d+|skipped) ([01]) \d+ \d{1,6} \d+$`)
		for _, r := range runSkipCase(t, dir, args) {
			s := r.summary(t)
			var shown int64
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			for _, l := range lines {
				m := progress.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("%s: progress line %q does not match %s", r.tool, l, progress)
				}
				n, _ := strconv.ParseInt(m[1], 10, 64)
				shown += n
			}
			// the progress lines cover the run up to the last report;
			// the report covers all of it
			if shown == 0 || shown > s.skipped {
				t.Errorf("%s: progress lines show %d skipped, report %d", r.tool, shown, s.skipped)
			}
			if len(s.perScript) != 2 || s.perScript[0]+s.perScript[1] != s.skipped {
				t.Errorf("%s: per-script skipped %v, total %d", r.tool, s.perScript, s.skipped)
			}
			byScript := make([]int64, 2)
			for _, l := range r.logs[0] {
				m := line.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("%s: log line %q does not match %s", r.tool, l, line)
				}
				if m[1] == "skipped" {
					byScript[m[2][0]-'0']++
				}
			}
			if len(s.perScript) == 2 && fmt.Sprint(byScript) != fmt.Sprint(s.perScript) {
				t.Errorf("%s: skipped log lines per script %v, report %v", r.tool, byScript, s.perScript)
			}
			t.Logf("%s: %d skipped (%v per script), progress %q", r.tool, s.skipped, s.perScript, lines)
		}
	})
}
