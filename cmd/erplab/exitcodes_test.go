package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/erplab/erplab/internal/capacity"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/exitcode"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/soak"
	"github.com/erplab/erplab/internal/workload"
)

// Every exit code through execute, the function main calls: cobra's own
// errors (unknown command, unknown flag, bad flag value, wrong argument
// count) get exitUsage structurally, each command's usage errors keep
// exitUsage, missing inputs exit exitError, and the threshold, doctor and
// interrupt codes come out as the table says.
func TestExecuteExitCodes(t *testing.T) {
	for _, v := range []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGSERVICE"} {
		t.Setenv(v, "")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	proc, sys := thpHost(t, "always")
	dsn := srv.NewDatabase(t)
	_, plainDSN := srv.NewRole(t, dsn) // no pg_monitor
	emptyDSN := srv.NewDatabase(t)     // no workload's data set
	if err := os.Mkdir("seg", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"ok.sql": "SELECT 1\n", "bad.sql": "SELEC 1\n", "ok.conf": "work_mem = '8MB'\n"} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	for _, c := range []struct {
		name string
		stop time.Duration // > 0: interrupt (cancel the context) after this long
		args []string
		want int
	}{
		{"version", 0, []string{"version"}, exitOK},
		{"help", 0, []string{"--help"}, exitOK},
		{"unknown command", 0, []string{"bogus"}, exitUsage},
		{"unknown command after flags", 0, []string{"--help=false", "frobnicate", "x"}, exitUsage},
		{"unknown flag on root", 0, []string{"--bogus"}, exitUsage},
		{"unknown flag", 0, []string{"version", "--bogus"}, exitUsage},
		{"unknown shorthand flag", 0, []string{"doctor", "-Z"}, exitUsage},
		{"unknown flag of a subcommand", 0, []string{"doctor", "fix", "--bogus"}, exitUsage},
		{"bad flag value", 0, []string{"top", "--count", "many"}, exitUsage},
		{"bad duration value", 0, []string{"doctor", "--sample", "soon"}, exitUsage},
		{"no args allowed", 0, []string{"version", "extra"}, exitUsage},
		{"too few args", 0, []string{"compare", "a.json"}, exitUsage},
		{"no arg", 0, []string{"report"}, exitUsage},
		{"too many args", 0, []string{"rewrite", "SELECT 1", "SELECT 2"}, exitUsage},
		{"subcommand arg validator", 0, []string{"doctor", "fix"}, exitUsage},
		{"unknown fix", 0, []string{"doctor", "fix", "nope"}, exitUsage},
		{"run", 0, []string{"run", "--apdex-min", "1.5"}, exitUsage},
		{"run workload flag", 0, []string{"run", "--workload", "erp", "--scale", "5000"}, exitUsage},
		{"init", 0, []string{"init"}, exitUsage},
		{"check", 0, []string{"check"}, exitUsage},
		{"top", 0, []string{"top", "--once"}, exitUsage},
		{"stress", 0, []string{"stress", "--timeout", "0s"}, exitUsage},
		{"disk", 0, []string{"disk"}, exitUsage},
		{"rewrite", 0, []string{"rewrite", "--disable", "nope", "ok.sql"}, exitUsage},
		{"rewrite parse", 0, []string{"rewrite", "bad.sql"}, exitUsage},
		{"proxy", 0, []string{"proxy"}, exitUsage},
		{"proxy bench", 0, []string{"proxy", "bench"}, exitUsage},
		{"doctor", 0, []string{"doctor", "--format", "xml"}, exitUsage},
		{"doctor ids", 0, []string{"doctor", "--only", "nope"}, exitUsage},
		{"compare", 0, []string{"compare", "--format", "xml", "a.json", "b.json"}, exitUsage},
		{"report", 0, []string{"report", "--format", "pdf", "a.json"}, exitUsage},
		{"ab", 0, []string{"ab"}, exitUsage},
		{"vs-pgbench", 0, []string{"vs-pgbench", "--repeat", "0"}, exitUsage},
		{"vs-pgbench cell", 0, []string{"vs-pgbench", "--cell", "-b select-only -c 8"}, exitUsage},
		{"vs-pgbench cell script", 0, []string{"vs-pgbench", "--cell", "-b nope -t 5"}, exitUsage},
		{"missing input", 0, []string{"compare", "a.json", "nope.json"}, exitError},
		{"missing report input", 0, []string{"report", "nope.json"}, exitError},
		{"unreachable server", 0, []string{"doctor", "--dsn", "host=/nonexistent port=1", "--sample", "0"}, exitError},
		{"doctor warning", 0, []string{"doctor", "--dsn", dsn, "--sample", "0", "--only", "thp-enabled", "--host",
			"--proc-root", proc, "--sys-root", sys}, exitDoctorWarning},
		{"doctor ok", 0, []string{"doctor", "--dsn", dsn, "--sample", "0", "--only", "thp-defrag", "--host",
			"--proc-root", proc, "--sys-root", sys}, exitOK},
		{"doctor incomplete", 0, []string{"doctor", "--dsn", plainDSN, "--sample", "0", "--only", "long-queries"}, exitResults},
		{"threshold", 0, []string{"run", "--workload", "smoke", "--dsn", dsn, "--users", "100", "--connections", "1", "--think", "0",
			"--duration", "1s", "--mix", "temp_churn=1", "--apdex-min", "1", "--out", "t.json", "--progress", "0"}, exitThreshold},
		{"interrupted", time.Second, []string{"run", "--workload", "smoke", "--dsn", dsn, "--duration", "30s", "--out", "i.json", "--progress", "0"}, exitInterrupted},
		// The table of docs/exit-codes.md (exitcode.Table), case by case (issue 16).
		{"unparsable dsn", 0, []string{"run", "--dsn", "port=abc", "--duration", "1s"}, exitUsage},
		{"unparsable dsn of doctor", 0, []string{"doctor", "--dsn", "port=abc", "--sample", "0"}, exitUsage},
		{"unparsable dsn of check", 0, []string{"check", "--dsn", "port=abc"}, exitUsage},
		{"bad metrics address", 0, []string{"run", "--metrics-addr", "nonsense", "--dsn", dsn, "--duration", "1s"}, exitUsage},
		{"bad metrics port of top", 0, []string{"top", "--metrics-addr", "127.0.0.1:99999", "--dsn", dsn, "--once"}, exitUsage},
		{"erp flag with smoke", 0, []string{"run", "--workload", "smoke", "--temp-style", "1c", "--dsn", dsn, "--duration", "1s"}, exitUsage},
		{"erp flag with smoke in ab", 0, []string{"ab", "--workload", "smoke", "--temp-style", "1c", "--variant", "x=settings:ok.sql"}, exitUsage},
		{"ab variant name twice", 0, []string{"ab", "--variant", "t=temp-style:lsfusion", "--variant", "t=temp-style:1c"}, exitUsage},
		{"ab remedy the workload lacks", 0, []string{"ab", "--workload", "smoke", "--variant", "t=temp-style:lsfusion"}, exitUsage},
		{"check of a workload without a check", 0, []string{"check", "--workload", "pgbench", "--dsn", dsn}, exitUsage},
		{"segment without the data set", 0, []string{"run", "--workload", "erp", "--dsn", emptyDSN, "--segment", "1/2", "--run-id", "nodata", "--duration", "1s", "--out", "seg"}, exitError},
		{"failed run", 0, []string{"run", "--workload", "smoke", "--dsn", emptyDSN, "--segment", "1/2", "--run-id", "nodata", "--duration", "1s", "--think", "0",
			"--users", "2", "--observe=false", "--progress", "0", "--out", "seg"}, exitRunFailed},
		{"soak flag without --soak", 0, []string{"run", "--dsn", dsn, "--window", "1m", "--duration", "1s"}, exitUsage},
		{"soak collapse", 0, []string{"run", "--dsn", dsn, "-f", "ok.sql", "--target", "ok=1us", "--users", "1", "--soak", "--window", "2s",
			"--duration", "30s", "--stop-on-collapse", "--progress", "0", "--probes=false", "--out", "collapse.json"}, exitCollapse},
		{"merge of a failed run", 0, []string{"merge", "--allow-partial", "seg", "-o", "merged.json"}, exitRunFailed},
		{"doctor fix interrupted", -1, []string{"doctor", "fix", "tmpfs-temp-tablespace", "--undo", "--dsn", dsn}, exitInterrupted},
		{"ab interrupted", 20 * time.Second, []string{"ab", "--workload", "smoke", "--variant", "t=settings:ok.conf", "--duration", "30s", "--out-dir", "ab-i"}, exitInterrupted},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		switch {
		case c.stop > 0:
			time.AfterFunc(c.stop, cancel)
		case c.stop < 0: // interrupted before it starts
			cancel()
		}
		got := execute(ctx, c.args)
		cancel()
		if got != c.want {
			t.Errorf("%s: erplab %q exits %d, want %d", c.name, c.args, got, c.want)
		}
	}
}

// The packages that detect a condition attach its code to their error:
// a command returns it untouched, and the code survives any wrapping,
// a later code around it included (first code wins).
func TestExitSentinelsCarryCodes(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"loadtest.ErrInterrupted", loadtest.ErrInterrupted, exitInterrupted},
		{"loadtest.ErrResultsIncomplete", loadtest.ErrResultsIncomplete, exitResults},
		{"engine.ErrNotAnswering", fmt.Errorf("%w: %w at t=3.0 s", engine.ErrAborted, engine.ErrNotAnswering), exitNotAnswering},
		{"engine.ErrServerGone", fmt.Errorf("%w: %w: no operation succeeded", engine.ErrAborted, engine.ErrServerGone), exitNotAnswering},
		{"loadtest.ErrRunFailed", loadtest.ErrRunFailed, exitRunFailed},
		{"soak.ErrCollapse", fmt.Errorf("%w: %w at 41m05s (window 8): window APDEX 0.42 below --collapse-apdex 0.5", engine.ErrAborted, soak.ErrCollapse), exitCollapse},
		{"engine.ErrAborted", fmt.Errorf("%w: 5 operations failed (--max-errors 5)", engine.ErrAborted), exitError},
		{"capacity.ErrInterrupted", capacity.ErrInterrupted, exitInterrupted},
		{"results.ErrIncomplete", results.ErrIncomplete, exitResults},
		{"workload.ErrCheckFailed", workload.ErrCheckFailed, exitCheckFailed},
		{"workload.CheckFailed", workload.CheckFailed("totals differ"), exitCheckFailed},
	} {
		err := withCode(exitError, fmt.Errorf("cmd: %w", c.err))
		if got := int(exitcode.Of(err)); got != c.want {
			t.Errorf("%s: exits %d, want %d", c.name, got, c.want)
		}
	}
	// Script mode speaks pgbench's codes: a lost server is its 2.
	if got := exitcode.Of(exitcode.Override(exitcode.ScriptRun, engine.ErrServerGone)); got != exitcode.ScriptRun {
		t.Errorf("script mode's lost server exits %d, want %d", got, exitcode.ScriptRun)
	}
}
