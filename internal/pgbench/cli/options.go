package cli

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/pgbench/script"
	"github.com/erplab/erplab/internal/pgbench/tables"
)

// MaxScripts is pgbench's MAX_SCRIPTS: at most 128 -f/-b/-S/-N options.
const MaxScripts = 128

// Action is what a command line asks for.
type Action uint8

// The actions of a pgbench command line.
const (
	// Run is a benchmark run (the default).
	Run Action = iota
	// Init is -i: create the tables.
	Init
	// Help is --help or -? as the first argument: Usage to stdout.
	Help
	// Version is -V or --version as the first argument.
	Version
	// ListBuiltins is -b list (or --show-script list): the list to stderr.
	ListBuiltins
	// ShowScript is --show-script NAME: the script to stderr
	// (Config.ShowScript holds the text to print).
	ShowScript
)

// Config is a parsed pgbench command line: pgbench's global settings,
// named after its options. Zero values are pgbench's defaults unless a
// field says otherwise.
type Config struct {
	Action Action
	// ShowScript is what --show-script prints, or the builtin list.
	ShowScript string

	// Connection: -h, -p, -U and the database (operand, else PGDATABASE,
	// else PGUSER, else the OS user: libpq decides when empty).
	Host, Port, User, DBName string

	// Initialization (-i).
	InitSteps       string // -I; "" = tables.DefaultSteps
	Scale           int    // -s; 1 when not given
	ScaleGiven      bool
	FillFactor      int // -F; 100 when not given
	Quiet           bool
	ForeignKeys     bool
	Unlogged        bool
	Tablespace      string
	IndexTablespace string
	Partitions      int
	PartitionMethod string // "range", "hash" or "" (none given)

	// Benchmarking.
	NoVacuum          bool // -n (both modes)
	VacuumAll         bool // -v
	Clients           int  // -c; 1
	Jobs              int  // -j; 1, at most Clients
	Transactions      int  // -t; 10 when neither -t nor -T
	Duration          int  // -T, seconds; 0 = none
	Connect           bool // -C
	Debug             bool // -d
	Defines           map[string]string
	DefineOrder       []string // names in command-line order
	Scripts           []*script.Script
	DefaultScript     bool // no script given: tpcb-like
	Mode              script.Mode
	Progress          int // -P seconds; 0 = none
	ProgressTimestamp bool
	Rate              float64 // -R, transactions per second; 0 = none
	LatencyLimitMs    float64 // -L; 0 = none
	PerCommand        bool    // -r
	Log               bool    // -l
	LogPrefix         string  // --log-prefix; "" = "pgbench_log"
	SamplingRate      float64 // --sampling-rate; 0 = every transaction
	AggregateInterval int     // --aggregate-interval seconds
	RandomSeed        uint64
	RandomSeedGiven   bool // --random-seed or PGBENCH_RANDOM_SEED set it
	MaxTries          int  // --max-tries; 1; 0 = unlimited
	FailuresDetailed  bool
	VerboseErrors     bool
	ExitOnAbort       bool // pgbench 17
	ContinueOnError   bool // pgbench 18

	// Info are the lines pgbench logs while parsing options ("setting
	// random seed to N"), to print on stderr as "pgbench: " lines.
	Info []string
}

// Error is a command-line error: the lines pgbench prints for it on
// stderr ("pgbench: error: ...", "pgbench: detail: ...", "pgbench: hint:
// ..."); the exit status is 1.
type Error struct{ Lines []string }

func (e *Error) Error() string { return strings.Join(e.Lines, "; ") }

func fatal(format string, args ...any) *Error {
	return &Error{Lines: []string{"pgbench: error: " + fmt.Sprintf(format, args...)}}
}

const helpHint = `pgbench: hint: Try "pgbench --help" for more information.`

// Long-only option codes.
const (
	optUnlogged = 256 + iota
	optTablespace
	optIndexTablespace
	optSamplingRate
	optAggregateInterval
	optProgressTimestamp
	optLogPrefix
	optForeignKeys
	optRandomSeed
	optShowScript
	optPartitions
	optPartitionMethod
	optFailuresDetailed
	optMaxTries
	optVerboseErrors
	optExitOnAbort
	optContinueOnError
)

// shortOpts is pgbench's getopt string.
const shortOpts = "iI:h:nvp:dqb:SNc:j:Crs:t:T:U:lf:D:F:M:P:R:L:"

var longOpts = []longOpt{
	{"builtin", requiredArg, 'b'},
	{"client", requiredArg, 'c'},
	{"connect", noArg, 'C'},
	{"debug", noArg, 'd'},
	{"define", requiredArg, 'D'},
	{"file", requiredArg, 'f'},
	{"fillfactor", requiredArg, 'F'},
	{"host", requiredArg, 'h'},
	{"initialize", noArg, 'i'},
	{"init-steps", requiredArg, 'I'},
	{"jobs", requiredArg, 'j'},
	{"log", noArg, 'l'},
	{"latency-limit", requiredArg, 'L'},
	{"no-vacuum", noArg, 'n'},
	{"port", requiredArg, 'p'},
	{"progress", requiredArg, 'P'},
	{"protocol", requiredArg, 'M'},
	{"quiet", noArg, 'q'},
	{"report-per-command", noArg, 'r'},
	{"rate", requiredArg, 'R'},
	{"scale", requiredArg, 's'},
	{"select-only", noArg, 'S'},
	{"skip-some-updates", noArg, 'N'},
	{"time", requiredArg, 'T'},
	{"transactions", requiredArg, 't'},
	{"username", requiredArg, 'U'},
	{"vacuum-all", noArg, 'v'},
	{"unlogged-tables", noArg, optUnlogged},
	{"tablespace", requiredArg, optTablespace},
	{"index-tablespace", requiredArg, optIndexTablespace},
	{"sampling-rate", requiredArg, optSamplingRate},
	{"aggregate-interval", requiredArg, optAggregateInterval},
	{"progress-timestamp", noArg, optProgressTimestamp},
	{"log-prefix", requiredArg, optLogPrefix},
	{"foreign-keys", noArg, optForeignKeys},
	{"random-seed", requiredArg, optRandomSeed},
	{"show-script", requiredArg, optShowScript},
	{"partitions", requiredArg, optPartitions},
	{"partition-method", requiredArg, optPartitionMethod},
	{"failures-detailed", noArg, optFailuresDetailed},
	{"max-tries", requiredArg, optMaxTries},
	{"verbose-errors", noArg, optVerboseErrors},
	{"exit-on-abort", noArg, optExitOnAbort},
	{"continue-on-error", noArg, optContinueOnError},
}

// Env gives the environment variables Parse reads (os.Getenv in the
// command; a map in tests).
type Env func(name string) string

// ReadFile reads a -f script ("-" is standard input).
type ReadFile func(path string) ([]byte, error)

// Parse parses a pgbench 15-17 command line (args without the program
// name, plus pgbench 18's --continue-on-error) the way pgbench's main()
// does: the same options, the same checks in the same order, the same
// messages. Scripts are read and parsed as their options come. Errors
// are *Error (exit status 1).
func Parse(args []string, env Env, read ReadFile) (*Config, error) {
	c := &Config{Scale: 1, FillFactor: 100, Clients: 1, Jobs: 1, MaxTries: 1, Defines: map[string]string{}}
	if len(args) > 0 {
		switch args[0] {
		case "--help", "-?":
			c.Action = Help
			return c, nil
		case "-V", "--version":
			c.Action = Version
			return c, nil
		}
	}
	if err := c.setRandomSeed(env("PGBENCH_RANDOM_SEED"), "PGBENCH_RANDOM_SEED environment variable"); err != nil {
		return nil, err
	}
	opts, operands, err := getoptLong(args, shortOpts, longOpts)
	if err != nil {
		return nil, &Error{Lines: []string{"pgbench: " + err.Error(), helpHint}}
	}
	var benchSet, initSet bool
	for _, o := range opts {
		a := o.arg
		switch o.code {
		case 'i':
			c.Action = Init
		case 'I':
			if err := checkInitSteps(a); err != nil {
				return nil, err
			}
			c.InitSteps = a
			initSet = true
		case 'h':
			c.Host = a
		case 'n':
			c.NoVacuum = true
		case 'v':
			benchSet = true
			c.VacuumAll = true
		case 'p':
			c.Port = a
		case 'd':
			c.Debug = true
		case 'C':
			benchSet = true
			c.Connect = true
		case 'r':
			benchSet = true
			c.PerCommand = true
		case 's':
			c.ScaleGiven = true
			if c.Scale, err = parseInt(a, "-s/--scale", 1, math.MaxInt32); err != nil {
				return nil, err
			}
		case 't':
			benchSet = true
			if c.Transactions, err = parseInt(a, "-t/--transactions", 1, math.MaxInt32); err != nil {
				return nil, err
			}
		case 'T':
			benchSet = true
			if c.Duration, err = parseInt(a, "-T/--time", 1, math.MaxInt32); err != nil {
				return nil, err
			}
		case 'c':
			benchSet = true
			if c.Clients, err = parseInt(a, "-c/--clients", 1, math.MaxInt32); err != nil {
				return nil, err
			}
		case 'j':
			benchSet = true
			if c.Jobs, err = parseInt(a, "-j/--jobs", 1, math.MaxInt32); err != nil {
				return nil, err
			}
		case 'U':
			c.User = a
		case 'l':
			benchSet = true
			c.Log = true
		case 'q':
			initSet = true
			c.Quiet = true
		case 'b':
			if a == "list" {
				c.Action = ListBuiltins
				c.ShowScript = BuiltinList()
				return c, nil
			}
			benchSet = true
			sc, err := script.Builtin(a)
			if err != nil {
				return nil, builtinError(err)
			}
			if err := c.addScript(sc); err != nil {
				return nil, err
			}
		case 'S', 'N':
			benchSet = true
			name := "select-only"
			if o.code == 'N' {
				name = "simple-update"
			}
			sc, _ := script.Builtin(name)
			if err := c.addScript(sc); err != nil {
				return nil, err
			}
		case 'f':
			benchSet = true
			sc, err := script.ParseFile(a, read)
			if err != nil {
				return nil, parseError(err, a, read)
			}
			if err := c.addScript(sc); err != nil {
				return nil, err
			}
		case 'D':
			benchSet = true
			k := strings.IndexByte(a, '=')
			if k <= 0 || k == len(a)-1 {
				return nil, fatal("invalid variable definition: %q", a)
			}
			name, value := a[:k], a[k+1:]
			if !script.ValidVarName(name) {
				return nil, fatal("option: invalid variable name: %q", name)
			}
			if _, seen := c.Defines[name]; !seen {
				c.DefineOrder = append(c.DefineOrder, name)
			}
			c.Defines[name] = value
		case 'F':
			initSet = true
			if c.FillFactor, err = parseInt(a, "-F/--fillfactor", 10, 100); err != nil {
				return nil, err
			}
		case 'M':
			benchSet = true
			if c.Mode, err = script.ParseMode(a); err != nil {
				return nil, fatal("%v", err)
			}
		case 'P':
			benchSet = true
			if c.Progress, err = parseInt(a, "-P/--progress", 1, math.MaxInt32); err != nil {
				return nil, err
			}
		case 'R':
			benchSet = true
			c.Rate = atof(a)
			if c.Rate <= 0 {
				return nil, fatal("invalid rate limit: %q", a)
			}
		case 'L':
			benchSet = true
			c.LatencyLimitMs = atof(a)
			if c.LatencyLimitMs <= 0 {
				return nil, fatal("invalid latency limit: %q", a)
			}
		case optUnlogged:
			initSet = true
			c.Unlogged = true
		case optTablespace:
			initSet = true
			c.Tablespace = a
		case optIndexTablespace:
			initSet = true
			c.IndexTablespace = a
		case optSamplingRate:
			benchSet = true
			c.SamplingRate = atof(a)
			if c.SamplingRate <= 0 || c.SamplingRate > 1 {
				return nil, fatal("invalid sampling rate: %q", a)
			}
		case optAggregateInterval:
			benchSet = true
			if c.AggregateInterval, err = parseInt(a, "--aggregate-interval", 1, math.MaxInt32); err != nil {
				return nil, err
			}
		case optProgressTimestamp:
			benchSet = true
			c.ProgressTimestamp = true
		case optLogPrefix:
			benchSet = true
			c.LogPrefix = a
		case optForeignKeys:
			initSet = true
			c.ForeignKeys = true
		case optRandomSeed:
			benchSet = true
			if err := c.setRandomSeed(a, "--random-seed option"); err != nil {
				return nil, err
			}
		case optShowScript:
			if a == "list" {
				c.Action = ListBuiltins
				c.ShowScript = BuiltinList()
				return c, nil
			}
			text, desc, err := script.BuiltinText(a)
			if err != nil {
				return nil, builtinError(err)
			}
			c.Action = ShowScript
			c.ShowScript = fmt.Sprintf("-- %s: %s\n%s\n", builtinName(desc), desc, text)
			return c, nil
		case optPartitions:
			initSet = true
			if c.Partitions, err = parseInt(a, "--partitions", 0, math.MaxInt32); err != nil {
				return nil, err
			}
		case optPartitionMethod:
			initSet = true
			switch strings.ToLower(a) {
			case tables.PartitionRange, tables.PartitionHash:
				c.PartitionMethod = strings.ToLower(a)
			default:
				return nil, fatal("invalid partition method, expecting \"range\" or \"hash\", got: %q", a)
			}
		case optFailuresDetailed:
			benchSet = true
			c.FailuresDetailed = true
		case optMaxTries:
			benchSet = true
			n := atoi(a)
			if n < 0 {
				return nil, fatal("invalid number of maximum tries: %q", a)
			}
			c.MaxTries = n
		case optVerboseErrors:
			benchSet = true
			c.VerboseErrors = true
		case optExitOnAbort:
			benchSet = true
			c.ExitOnAbort = true
		case optContinueOnError:
			benchSet = true
			c.ContinueOnError = true
		}
	}
	if len(c.Scripts) == 0 && c.Action != Init {
		sc, _ := script.Builtin("tpcb-like")
		c.Scripts = append(c.Scripts, sc)
		c.DefaultScript = true
	}
	if c.Action != Init {
		total := 0
		for _, s := range c.Scripts {
			total += s.Weight
		}
		if total == 0 {
			return nil, fatal("total script weight must not be zero")
		}
	}
	if len(operands) > 0 {
		c.DBName = operands[0]
		operands = operands[1:]
	} else if v := env("PGDATABASE"); v != "" {
		c.DBName = v
	}
	if len(operands) > 0 {
		return nil, &Error{Lines: []string{fmt.Sprintf("pgbench: error: too many command-line arguments (first is %q)", operands[0]), helpHint}}
	}
	if c.Action == Init {
		if benchSet {
			return nil, fatal("some of the specified options cannot be used in initialization (-i) mode")
		}
		if c.PartitionMethod != "" && c.Partitions == 0 {
			return nil, fatal("--partition-method requires greater than zero --partitions")
		}
		return c, nil
	}
	if initSet {
		return nil, fatal("some of the specified options cannot be used in benchmarking mode")
	}
	if c.Transactions > 0 && c.Duration > 0 {
		return nil, fatal("specify either a number of transactions (-t) or a duration (-T), not both")
	}
	if c.Transactions == 0 && c.Duration == 0 {
		c.Transactions = 10
	}
	if c.SamplingRate > 0 && !c.Log {
		return nil, fatal("log sampling (--sampling-rate) is allowed only when logging transactions (-l)")
	}
	if c.SamplingRate > 0 && c.AggregateInterval > 0 {
		return nil, fatal("log sampling (--sampling-rate) and aggregation (--aggregate-interval) cannot be used at the same time")
	}
	if c.AggregateInterval > 0 && !c.Log {
		return nil, fatal("log aggregation is allowed only when actually logging transactions")
	}
	if !c.Log && c.LogPrefix != "" {
		return nil, fatal("log file prefix (--log-prefix) is allowed only when logging transactions (-l)")
	}
	if c.Duration > 0 && c.AggregateInterval > c.Duration {
		return nil, fatal("number of seconds for aggregation (%d) must not be higher than test duration (%d)", c.AggregateInterval, c.Duration)
	}
	if c.Duration > 0 && c.AggregateInterval > 0 && c.Duration%c.AggregateInterval != 0 {
		return nil, fatal("duration (%d) must be a multiple of aggregation interval (%d)", c.Duration, c.AggregateInterval)
	}
	if c.ProgressTimestamp && c.Progress == 0 {
		return nil, fatal("--progress-timestamp is allowed only under --progress")
	}
	if c.MaxTries == 0 && c.LatencyLimitMs == 0 && c.Duration == 0 {
		return nil, fatal("an unlimited number of transaction tries can only be used with --latency-limit or a duration (-T)")
	}
	if c.Jobs > c.Clients {
		c.Jobs = c.Clients
	}
	if err := c.checkArgs(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkArgs rejects, in the extended and prepared modes, a SQL command
// with more variable references than pgbench's MAX_ARGS allows (pgbench
// finds it while parsing the script: exit status 1).
func (c *Config) checkArgs() error {
	if c.Mode == script.Simple {
		return nil
	}
	if _, err := script.NewClient(c.Scripts, script.Options{Mode: c.Mode}); err != nil {
		return scriptError(err)
	}
	return nil
}

func (c *Config) addScript(s *script.Script) error {
	if len(c.Scripts) >= MaxScripts {
		return fatal("at most %d SQL scripts are allowed", MaxScripts)
	}
	c.Scripts = append(c.Scripts, s)
	return nil
}

// setRandomSeed is pgbench's set_random_seed: "" (not given) or "time"
// seeds from the clock, "rand" from a strong random source, else an
// unsigned integer; a given seed is logged.
func (c *Config) setRandomSeed(s, from string) error {
	var seed uint64
	switch s {
	case "", "time":
		seed = uint64(time.Now().UnixMicro())
	case "rand":
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fatal("could not generate random seed")
		}
		seed = binary.LittleEndian.Uint64(b[:])
	default:
		v, ok := scanUnsigned(s)
		if !ok {
			return &Error{Lines: []string{
				fmt.Sprintf("pgbench: error: unrecognized random seed option %q", s),
				`pgbench: detail: Expecting an unsigned integer, "time" or "rand".`,
				"pgbench: error: error while setting random seed from " + from,
			}}
		}
		seed = v
	}
	c.RandomSeed = seed
	if s != "" {
		c.RandomSeedGiven = true
		c.Info = append(c.Info, fmt.Sprintf("setting random seed to %d", seed))
	}
	return nil
}

// scanUnsigned is sscanf("%llu%c") == 1: optional blanks, an optional
// sign (a minus wraps, as strtoull does), decimal digits, nothing after.
func scanUnsigned(s string) (uint64, bool) {
	s = strings.TrimLeft(s, " \t\n\r\v\f")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// checkInitSteps is pgbench's checkInitSteps.
func checkInitSteps(steps string) error {
	if steps == "" {
		return fatal("no initialization steps specified")
	}
	for _, ch := range steps {
		if !strings.ContainsRune(tables.AllSteps+" ", ch) {
			return &Error{Lines: []string{
				fmt.Sprintf("pgbench: error: unrecognized initialization step %q", string(ch)),
				fmt.Sprintf("pgbench: detail: Allowed step characters are: %q.", tables.AllSteps),
			}}
		}
	}
	return nil
}

// blanks are C's isspace characters.
const blanks = " \t\n\r\v\f"

// parseInt is fe_utils' option_parse_int: strtol in base 10 (leading
// blanks and a sign allowed), trailing blanks allowed, nothing else; the
// value must fit an int and lie in [lo, hi].
func parseInt(s, name string, lo, hi int) (int, error) {
	t := strings.TrimLeft(s, blanks)
	i := 0
	if i < len(t) && (t[i] == '+' || t[i] == '-') {
		i++
	}
	j := i
	for j < len(t) && t[j] >= '0' && t[j] <= '9' {
		j++
	}
	if strings.TrimLeft(t[j:], blanks) != "" || (j == i && t != "") {
		return 0, fatal("invalid value %q for option %s", s, name)
	}
	v, err := strconv.ParseInt(t[:j], 10, 64)
	if j == i {
		v, err = 0, nil // strtol of nothing is 0
	}
	if err != nil || v < int64(lo) || v > int64(hi) {
		return 0, fatal("%s must be in range %d..%d", name, lo, hi)
	}
	return int(v), nil
}

// atof is C's atof: the longest leading decimal number (after blanks),
// 0 when there is none.
func atof(s string) float64 {
	t := strings.TrimLeft(s, blanks)
	i := 0
	if i < len(t) && (t[i] == '+' || t[i] == '-') {
		i++
	}
	digits := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(t) && t[i] == '.' {
		i++
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return 0
	}
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		k := i + 1
		if k < len(t) && (t[k] == '+' || t[k] == '-') {
			k++
		}
		if k < len(t) && t[k] >= '0' && t[k] <= '9' {
			for k < len(t) && t[k] >= '0' && t[k] <= '9' {
				k++
			}
			i = k
		}
	}
	v, _ := strconv.ParseFloat(t[:i], 64) // out of range: +-Inf or 0, as strtod
	return v
}

// atoi is C's atoi: optional blanks and sign, then the leading digits.
func atoi(s string) int {
	s = strings.TrimLeft(s, " \t\n\r\v\f")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	v := 0
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		v = v*10 + int(s[i]-'0')
		if v > math.MaxInt32 {
			v = math.MaxInt32
		}
	}
	if neg {
		return -v
	}
	return v
}

// BuiltinList is pgbench's listAvailableScripts output.
func BuiltinList() string {
	var b strings.Builder
	b.WriteString("Available builtin scripts:\n")
	for _, n := range script.BuiltinNames() {
		_, desc, _ := script.BuiltinText(n)
		fmt.Fprintf(&b, "  %13s: %s\n", n, desc)
	}
	b.WriteString("\n")
	return b.String()
}

func builtinName(desc string) string {
	for _, n := range script.BuiltinNames() {
		if _, d, _ := script.BuiltinText(n); d == desc {
			return n
		}
	}
	return desc
}

// builtinError words a -b error as pgbench does: the error, then the
// list of builtin scripts.
func builtinError(err error) *Error {
	msg := err.Error()
	if i := strings.Index(msg, " (available:"); i > 0 {
		msg = msg[:i]
	}
	lines := []string{"pgbench: error: " + msg}
	return &Error{Lines: append(lines, strings.Split(strings.TrimRight(BuiltinList(), "\n"), "\n")...)}
}

// parseError words a script's parse error as pgbench's syntax_error: the
// message with file and line, the line itself, and a caret under the
// faulty column when the error is inside the command.
func parseError(err error, spec string, read ReadFile) *Error {
	var pe *script.ParseError
	if !errors.As(err, &pe) {
		return scriptError(err)
	}
	lines := []string{fmt.Sprintf("pgbench: error: %s:%d: %s", pe.File, pe.Line, pe.Msg)}
	path, _, _ := script.ParseWeighted(spec)
	if path == "-" {
		return &Error{Lines: lines}
	}
	src, rerr := read(path)
	if rerr != nil {
		return &Error{Lines: lines}
	}
	text := strings.Split(string(src), "\n")
	if pe.Line >= 1 && pe.Line <= len(text) {
		l := strings.TrimRight(text[pe.Line-1], "\r")
		lines = append(lines, l)
		if pe.Column > 1 {
			lines = append(lines, fmt.Sprintf("%*c error found here", pe.Column, '^'))
		}
	}
	return &Error{Lines: lines}
}

// scriptError words a script error.
func scriptError(err error) *Error {
	return &Error{Lines: []string{"pgbench: error: " + err.Error()}}
}
