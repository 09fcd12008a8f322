package cli

import (
	"reflect"
	"strings"
	"testing"
)

// getopt_long's acceptance: clusters, attached and detached arguments,
// abbreviations, permutation, "--".
func TestGetoptLong(t *testing.T) {
	type opt struct {
		code int
		arg  string
	}
	cases := []struct {
		args     []string
		opts     []opt
		operands []string
		err      string
	}{
		{args: []string{"-c3", "-nS", "db"}, opts: []opt{{'c', "3"}, {'n', ""}, {'S', ""}}, operands: []string{"db"}},
		{args: []string{"db", "-c", "3", "--client=4", "--cl", "5"}, opts: []opt{{'c', "3"}, {'c', "4"}, {'c', "5"}}, operands: []string{"db"}},
		{args: []string{"-nc3"}, opts: []opt{{'n', ""}, {'c', "3"}}},
		{args: []string{"-t", "-5"}, opts: []opt{{'t', "-5"}}},
		{args: []string{"--", "-S", "x"}, operands: []string{"-S", "x"}},
		{args: []string{"-"}, operands: []string{"-"}},
		{args: []string{"--progress-timestamp"}, opts: []opt{{optProgressTimestamp, ""}}},
		{args: []string{"--progress", "5"}, opts: []opt{{'P', "5"}}},
		{args: []string{"--prog=5"}, err: "option '--prog' is ambiguous; possibilities: '--progress' '--progress-timestamp'"},
		{args: []string{"--c"}, err: "is ambiguous"},
		{args: []string{"--bad-option"}, err: "unrecognized option '--bad-option'"},
		{args: []string{"-x"}, err: "invalid option -- 'x'"},
		{args: []string{"-c"}, err: "option requires an argument -- 'c'"},
		{args: []string{"--client"}, err: "option '--client' requires an argument"},
		{args: []string{"--connect=1"}, err: "option '--connect' doesn't allow an argument"},
	}
	for _, c := range cases {
		opts, operands, err := getoptLong(c.args, shortOpts, longOpts)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		var got []opt
		for _, o := range opts {
			got = append(got, opt{o.code, o.arg})
		}
		if !reflect.DeepEqual(got, c.opts) || !reflect.DeepEqual(operands, c.operands) {
			t.Errorf("%q: opts %v operands %q, want %v %q", c.args, got, operands, c.opts, c.operands)
		}
	}
}

// C's number parsing as pgbench uses it.
func TestNumbers(t *testing.T) {
	for s, want := range map[string]float64{"0.0": 0, "1e3x": 1000, " 2.5": 2.5, "abc": 0, ".5": 0.5, "1e": 1, "-3": -3} {
		if got := atof(s); got != want {
			t.Errorf("atof(%q) = %g, want %g", s, got, want)
		}
	}
	for s, want := range map[string]int{"-10": -10, "3x": 3, "x": 0, " +7": 7} {
		if got := atoi(s); got != want {
			t.Errorf("atoi(%q) = %d, want %d", s, got, want)
		}
	}
	if v, err := parseInt(" 12 ", "-c/--clients", 1, 100); err != nil || v != 12 {
		t.Errorf("parseInt = %d, %v", v, err)
	}
	for s, want := range map[string]string{"three": `invalid value "three" for option -c/--clients`, "0": "-c/--clients must be in range 1..100",
		"99999999999": "-c/--clients must be in range 1..100", "": "-c/--clients must be in range 1..100"} {
		if _, err := parseInt(s, "-c/--clients", 1, 100); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseInt(%q): %v, want %q", s, err, want)
		}
	}
}
