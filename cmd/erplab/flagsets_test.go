package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/exitcode"
)

// ownMeaning are the commands' own flags that bear a set flag's name with
// another meaning (and so another type or default): capacity's search
// (--ramp of every step, 10s; --rate, the load counted in arrivals/s) and
// replay's --progress switch.
var ownMeaning = map[string]bool{"capacity --ramp": true, "capacity --rate": true, "replay --progress": true}

// A flag that run, ab, capacity and replay share has one type and one
// default on all of them (the sets of flagsets.go), whatever help text a
// command gives it.
func TestFlagSetsOneDefault(t *testing.T) {
	cmds := map[string]*cobra.Command{"run": newRunCmd(), "ab": newABCmd(), "capacity": newCapacityCmd(), "replay": newReplayCmd()}
	type seen struct{ cmd, typ, def string }
	first := map[string]seen{}
	var shared pflag.FlagSet
	var l loadFlags
	var s serverFlags
	var o outputFlags
	var b observeFlags
	l.register(&shared)
	s.register(&shared)
	o.register(&shared)
	b.register(&shared)
	n := 0
	for _, name := range []string{"run", "ab", "capacity", "replay"} {
		cmds[name].Flags().VisitAll(func(f *pflag.Flag) {
			if shared.Lookup(f.Name) == nil || ownMeaning[name+" --"+f.Name] {
				return // the command's own flag
			}
			n++
			if p, ok := first[f.Name]; !ok {
				first[f.Name] = seen{name, f.Value.Type(), f.DefValue}
			} else if p.typ != f.Value.Type() || p.def != f.DefValue {
				t.Errorf("--%s: %s %s default %q, %s %s default %q", f.Name, p.cmd, p.typ, p.def, name, f.Value.Type(), f.DefValue)
			}
		})
	}
	if n < 4*len([]string{"dsn", "dsn-file", "out-mode"}) {
		t.Errorf("only %d shared flags on the four commands", n)
	}
	// run with no flags keeps its defaults (the README's first command)
	for name, want := range map[string]string{"workload": "smoke", "progress": "5s", "users": "10", "duration": "1m0s"} {
		if got := cmds["run"].Flags().Lookup(name).DefValue; got != want {
			t.Errorf("run --%s defaults to %q, want %q", name, got, want)
		}
	}
}

// erplab run has none of pgbench's own flags: they are erplab pgbench's.
func TestRunHasNoPgbenchFlags(t *testing.T) {
	fl := newRunCmd().Flags()
	for _, sh := range []string{"c", "j", "T", "t", "M", "S", "N", "L", "D", "n", "r", "P", "R"} {
		if f := fl.ShorthandLookup(sh); f != nil {
			t.Errorf("run has -%s (--%s)", sh, f.Name)
		}
	}
	for _, name := range []string{"client", "jobs", "time", "transactions", "define", "no-vacuum", "report-per-command",
		"random-seed", "max-tries", "continue-on-error", "select-only", "skip-some-updates"} {
		if fl.Lookup(name) != nil {
			t.Errorf("run has --%s", name)
		}
	}
	for _, name := range []string{"file", "builtin", "target", "protocol"} {
		if fl.Lookup(name) == nil {
			t.Errorf("run lacks --%s (the script workload's)", name)
		}
	}
}

// TestPgbenchFlagsNamed: pgbench's options given to a command of the
// shared sets (run -c 4 -T 5 out of habit) are named with what the
// command takes instead, or with erplab pgbench, in one usage line.
func TestPgbenchFlagsNamed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-c", "4", "-T", "5"}, "unknown shorthand flag: 'c' in -c; pgbench's -c (clients) is --users here (and --connections: the connections they share); pgbench's own command line is 'erplab pgbench' (see 'erplab run --help')"},
		{[]string{"run", "-T", "5"}, "pgbench's -T (seconds to run) is --duration here (a duration: --duration 5s)"},
		{[]string{"run", "-c4"}, "pgbench's -c (clients) is --users here"},
		{[]string{"run", "--client", "4"}, "pgbench's --client (clients) is --users here"},
		{[]string{"run", "-j", "2"}, "pgbench's -j (threads) is not an option of erplab run: pgbench's own command line is 'erplab pgbench'"},
		{[]string{"run", "-i"}, "pgbench's -i (initialization) is 'erplab init --workload pgbench -s N'"},
		{[]string{"ab", "-S"}, "pgbench's -S (select-only script) is not an option of erplab ab"},
		{[]string{"capacity", "-c", "4"}, "pgbench's -c (clients) is not an option of erplab capacity"},
		{[]string{"run", "-Z"}, "unknown shorthand flag: 'Z' in -Z (see 'erplab run --help')"},
	} {
		_, err := runRoot(t, c.args...)
		if err == nil || exitcode.Of(err) != exitcode.Usage || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("erplab %q: %v (code %d), want %q", c.args, err, exitcode.Of(err), c.want)
		}
	}
}

// TestSetPartsNamed: a command taking a part of a shared set says under
// the set's heading which flags it leaves out (those it has of its own
// by the same name marked so); run takes every set whole; the README
// names replay's flags of the sets as replay composes them.
func TestSetPartsNamed(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want []string
	}{
		{"run", []string{"Flags of the load set:\n", "Flags of the observe set:\n"}},
		{"ab", []string{"Flags of the load set (not: --latency-limit, --rate, --rate-stage, --stress):\n", "Flags of the server set (not: --force, --keep):\n"}},
		{"capacity", []string{"Flags of the load set (not: --duration, --latency-limit, --ramp (its own), --rate (its own), --rate-stage, --stage, --users):\n"}},
		{"replay", []string{"Flags of the server set (not: --keep (its own), --os-user, --server-gone-after):\n"}},
	} {
		out, err := runRoot(t, c.cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s --help lacks %q", c.cmd, w)
			}
		}
		if c.cmd == "run" && strings.Contains(out, "(not: ") {
			t.Errorf("run takes every set whole, yet its help says it leaves flags out")
		}
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`replay` only ([^.]+)\\.").FindSubmatch(b)
	if m == nil {
		t.Fatal("README does not say which flags of the sets replay takes")
	}
	said := regexp.MustCompile("--[a-z-]+").FindAllString(strings.ReplaceAll(string(m[1]), "\n", " "), -1)
	var has []string
	for name, set := range flagSections(newReplayCmd().Flags()) {
		if name != "" {
			set.VisitAll(func(f *pflag.Flag) { has = append(has, "--"+f.Name) })
		}
	}
	slices.Sort(said)
	slices.Sort(has)
	if !slices.Equal(said, has) {
		t.Errorf("README says replay takes %v of the sets, it takes %v", said, has)
	}
}
