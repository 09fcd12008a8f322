package remedy

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/erplab/erplab/internal/pgcluster"
)

// Kind is one remedy of the registry.
type Kind struct {
	// Name is the remedy as written on the command line, e.g.
	// "rewrite-proxy"; a word without ':' or ','.
	Name string
	// Syntax is how it is written with its argument, e.g.
	// "temp-style:1c|lsfusion" (default Name).
	Syntax string
	// Doc says what it does, for help texts: one sentence; lines after
	// the first continue it.
	Doc string
	// NeedsRoot, when not empty, says why the remedy needs root (e.g.
	// "it mounts a tmpfs"); Apply refuses a non-root process.
	NeedsRoot string
	// NeedsCold, when not empty, says why the remedy takes effect only in
	// a server started after its Apply (e.g. "THP applies to memory
	// mapped after the change"): such a remedy restarts the server
	// itself, so a comparison is fair only when every run, the
	// baseline's too, starts after a restart; CheckCold refuses it
	// without cold runs (ab --cold).
	NeedsCold string
	// Preflight, when set, checks before anything starts that this host
	// can take the remedy with argument arg (e.g. that a kernel file it
	// writes exists) and returns a one-line error; CheckRunnable calls
	// it once the process is known to be root where NeedsRoot asks.
	Preflight func(arg string) error
	// Params are command-line parameters of the remedy, shared by every
	// run that applies it (e.g. tmpfs-size); values reach Apply through
	// Target.Param.
	Params []Param
	// WorkloadFlag, when not empty, is the workload option the remedy
	// sets in Target.Flags (e.g. "temp-style"): only a workload that
	// declares that option can take the remedy, which `erplab ab` checks
	// before it builds anything.
	WorkloadFlag string
	// Primary are the comparison rows that answer "did this remedy
	// work?", declared here, before any run (package compare's "Primary
	// and exploratory rows"): "SUBJECT:METRIC" as compare.ParseKey reads
	// them, e.g. "integral:apdex", "temp_table_storm:apdex". `erplab ab`
	// decides a variant's verdict by Holm over its remedies' primary
	// rows alone (--primary overrides them); empty means the integral
	// APDEX. A remedy aimed at one key operation declares its p95 with
	// its APDEX: an operation's APDEX can be the same in every round of
	// a side, which only a permutation p-value tests (2/C(2n, n): 0.33
	// with 2 rounds a side), while its p95 takes Welch's t.
	Primary []string
	// Parse checks the argument (the text after "Name:") and returns a
	// one-line error without the remedy's text (Parse adds it). Nil means
	// the remedy takes no argument.
	Parse func(arg string) error
	// Apply changes t and returns what it changed; on error it leaves
	// nothing behind. Required.
	Apply func(ctx context.Context, t *Target, arg string) (*Effect, error)
	// Undo reverses Apply; it may add to e.Changed. Nil means nothing to
	// undo.
	Undo func(ctx context.Context, t *Target, e *Effect) error
}

// syntax is k.Syntax or k.Name.
func (k Kind) syntax() string {
	if k.Syntax != "" {
		return k.Syntax
	}
	return k.Name
}

// Param is a command-line parameter of a remedy (`erplab ab --NAME`).
type Param struct {
	// Name is the flag name, e.g. "tmpfs-size".
	Name string
	// Default is the value when the flag is not given.
	Default string
	// Usage is the flag's help text.
	Usage string
	// Check, when not nil, checks a value before anything starts
	// (CheckRunnable) and returns a one-line error without the flag's
	// name.
	Check func(value string) error
}

// Effect is what one applied remedy changed.
type Effect struct {
	// Changed is recorded as the remedy's extra.remedies[i].changed (a
	// JSON object); Apply fills it, Undo may add to it.
	Changed map[string]any
	// State is the remedy's own, for its Undo.
	State any
}

// Target is what a run's remedies act on; the caller makes one per run
// and hands it to each remedy of the run in order.
type Target struct {
	// Cluster is the run's server (embedded: remedies may change its
	// configuration and mounts).
	Cluster *pgcluster.Cluster
	// Database is the run's database on Cluster.
	Database string
	// DSN is what the run's connections use; it starts as
	// Cluster.DSN(Database), and a remedy that puts something between
	// clients and server replaces it.
	DSN string
	// ServerDSN is the run database's DSN at the server itself, never a
	// proxy's (experiment.InVariant sets it): what a remedy acting on the
	// server's files connects to. "" means Cluster.DSN(Database).
	ServerDSN string
	// Admin is a maintenance connection's DSN (ALTER SYSTEM is sent
	// there): the cluster's database postgres, or the user's --dsn on a
	// server erplab did not start (Cluster nil). "" means
	// Cluster.DSN("postgres").
	Admin string
	// DSNAt, when set, is the run database's DSN at host:port (a proxy in
	// front of the server) with the run's credentials.
	DSNAt func(host string, port int, db string) string
	// RecordSettings, when set (a server erplab did not start), records
	// the settings a remedy is about to change with ALTER SYSTEM in the
	// crash-safe leftover record, so that the next erplab command resets
	// them after a kill -9; forget removes the record once they are reset.
	RecordSettings func(ctx context.Context, names, values []string) (forget func(), err error)
	// RecordTablespace, when set (a server erplab did not start), records
	// a tablespace a remedy is about to create in the crash-safe leftover
	// record, so that the next erplab command drops it after a kill -9;
	// forget removes the record once it is dropped.
	RecordTablespace func(ctx context.Context, name string) (forget func(), err error)
	// Restart, when set (ab --dsn --allow-restart on a local server),
	// restarts the server and returns once it accepts connections: the
	// settings remedy then applies settings of context postmaster (ALTER
	// SYSTEM SET, restart) and undoes them (ALTER SYSTEM RESET, restart).
	// Nil: such settings are refused.
	Restart func(ctx context.Context) error
	// Flags are the workload's flag values by flag name (e.g.
	// "temp-style": "1c"), starting from the baseline's; a remedy may
	// override one. The run's workload is built from them after every
	// remedy has applied. Never nil.
	Flags map[string]string
	// Params are the values of remedy parameters (Kind.Params) by name;
	// see Param.
	Params map[string]string
	// Log receives the remedies' progress lines.
	Log io.Writer
}

// Param returns the value of remedy parameter name: t.Params[name] when
// set, else the Default of the registered Param ("" when none).
func (t *Target) Param(name string) string {
	if v, ok := t.Params[name]; ok {
		return v
	}
	for _, k := range Kinds() {
		for _, p := range k.Params {
			if p.Name == name {
				return p.Default
			}
		}
	}
	return ""
}

// AdminDSN is t.Admin, or the cluster's database postgres.
func (t *Target) AdminDSN() string {
	if t.Admin != "" || t.Cluster == nil {
		return t.Admin
	}
	return t.Cluster.DSN("postgres")
}

// Remedy is a remedy as given for a run: its kind and argument.
type Remedy struct {
	Kind string // a registered Kind's Name
	Arg  string // the text after "Kind:", "" for none
}

// String is the remedy as written on the command line.
func (r Remedy) String() string {
	if r.Arg == "" {
		return r.Kind
	}
	return r.Kind + ":" + r.Arg
}

// Record is what one remedy changed, kept in a run's results as an
// element of extra.remedies.
type Record struct {
	Remedy  string         `json:"remedy"`
	Kind    string         `json:"kind"`
	Changed map[string]any `json:"changed"`
}

var (
	mu    sync.RWMutex
	kinds = map[string]Kind{}
)

// Register adds k to the registry; remedy packages call it from init. It
// panics on a programming error: an empty or malformed name, a nil Apply,
// a name registered twice.
func Register(k Kind) {
	if k.Name == "" || strings.ContainsAny(k.Name, ":, \t") || k.Apply == nil {
		panic(fmt.Sprintf("remedy.Register: bad kind %q (name without ':', ',' or blanks, and Apply required)", k.Name))
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := kinds[k.Name]; dup {
		panic("remedy.Register: " + k.Name + " registered twice")
	}
	kinds[k.Name] = k
}

// Lookup returns the registered kind name.
func Lookup(name string) (Kind, bool) {
	mu.RLock()
	defer mu.RUnlock()
	k, ok := kinds[name]
	return k, ok
}

// Kinds returns the registered kinds sorted by name.
func Kinds() []Kind {
	mu.RLock()
	out := make([]Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Known is the registered kinds' Syntax, comma-separated, e.g.
// "rewrite-proxy, settings:FILE".
func Known() string {
	var s []string
	for _, k := range Kinds() {
		s = append(s, k.syntax())
	}
	return strings.Join(s, ", ")
}

// Parse parses one remedy "NAME" or "NAME:ARG" (surrounding blanks
// ignored) and checks its argument with the kind's Parse. Errors are one
// line and quote s.
func Parse(s string) (Remedy, error) {
	name, arg, _ := strings.Cut(strings.TrimSpace(s), ":")
	k, ok := Lookup(name)
	if !ok {
		return Remedy{}, fmt.Errorf("unknown remedy %q (known: %s)", s, Known())
	}
	if k.Parse == nil {
		if arg != "" {
			return Remedy{}, fmt.Errorf("remedy %q: %s takes no argument", s, name)
		}
	} else if err := k.Parse(arg); err != nil {
		return Remedy{}, fmt.Errorf("remedy %q: %w", s, err)
	}
	return Remedy{Kind: name, Arg: arg}, nil
}

// CheckRunnable checks, before anything starts, that this process can
// apply every remedy of rs: root (isRoot) for a kind with NeedsRoot, and
// every parameter of their kinds (Param.Check) with its value in params
// (the Param's Default when absent). command names the erplab command
// the user ran, for the message ("run erplab capacity as root"). Errors
// are one line; unknown kinds are Parse's to report and pass here.
func CheckRunnable(command string, rs []Remedy, params map[string]string, isRoot bool) error {
	for _, r := range rs {
		k, ok := Lookup(r.Kind)
		if !ok {
			continue
		}
		if k.NeedsRoot != "" && !isRoot {
			return fmt.Errorf("remedy %s needs root (%s); run erplab %s as root or drop the remedy", k.Name, k.NeedsRoot, command)
		}
		if k.Preflight != nil {
			if err := k.Preflight(r.Arg); err != nil {
				return fmt.Errorf("remedy %s: %w", r, err)
			}
		}
		for _, p := range k.Params {
			v, given := params[p.Name]
			if !given {
				v = p.Default
			}
			if p.Check != nil {
				if err := p.Check(v); err != nil {
					return fmt.Errorf("--%s %q (remedy %s): %w", p.Name, v, k.Name, err)
				}
			}
		}
	}
	return nil
}

// CheckCold refuses, in one line, a remedy of rs with NeedsCold unless
// cold (every run starts after a server restart: ab --cold); the caller
// adds how its command gets cold runs.
func CheckCold(rs []Remedy, cold bool) error {
	if cold {
		return nil
	}
	for _, r := range rs {
		if k, ok := Lookup(r.Kind); ok && k.NeedsCold != "" {
			return fmt.Errorf("remedy %s restarts the server under its setting (%s), so it needs cold runs, where every run, the baseline's too, starts after a restart", r, k.NeedsCold)
		}
	}
	return nil
}

// Applied is a remedy in effect on a target (see Apply).
type Applied struct {
	// Remedy is what was applied.
	Remedy Remedy
	// Effect is what Apply returned (and Undo completed).
	Effect *Effect
	kind   Kind
	target *Target
	undone bool
}

// Apply applies r to t: it refuses a remedy with NeedsRoot for a non-root
// process, then calls the kind's Apply. The error is the kind's, or names
// an unregistered kind.
func Apply(ctx context.Context, t *Target, r Remedy) (*Applied, error) {
	k, ok := Lookup(r.Kind)
	if !ok {
		return nil, fmt.Errorf("unknown remedy %s", r.Kind)
	}
	if k.NeedsRoot != "" && os.Geteuid() != 0 {
		return nil, fmt.Errorf("remedy %s needs root (%s); run erplab ab as root or drop the remedy", k.Name, k.NeedsRoot)
	}
	e, err := k.Apply(ctx, t, r.Arg)
	if err != nil {
		return nil, err
	}
	if e == nil {
		e = &Effect{}
	}
	if e.Changed == nil {
		e.Changed = map[string]any{}
	}
	return &Applied{Remedy: r, Effect: e, kind: k, target: t}, nil
}

// Undo reverses the remedy (the kind's Undo) once; later calls return nil.
func (a *Applied) Undo(ctx context.Context) error {
	if a.undone {
		return nil
	}
	a.undone = true
	if a.kind.Undo == nil {
		return nil
	}
	return a.kind.Undo(ctx, a.target, a.Effect)
}

// Record is the remedy's entry of extra.remedies: its text, kind and
// Effect.Changed (shared, so call it after Undo for the complete record).
func (a *Applied) Record() Record {
	return Record{Remedy: a.Remedy.String(), Kind: a.Remedy.Kind, Changed: a.Effect.Changed}
}

// WriteHelp writes one entry per registered kind: its Syntax padded to a
// column, its Doc (continuation lines indented to the same column) and,
// for a remedy that needs root, why.
func WriteHelp(w io.Writer) error {
	const col = 25
	for _, k := range Kinds() {
		lines := strings.Split(strings.TrimSpace(k.Doc), "\n")
		if k.NeedsRoot != "" {
			lines = append(lines, "root only: "+k.NeedsRoot)
		}
		if k.NeedsCold != "" {
			lines = append(lines, "with --cold only: "+k.NeedsCold)
		}
		for i, l := range lines {
			head := ""
			if i == 0 {
				head = k.syntax()
			}
			if len(head) >= col {
				head += " "
			}
			if _, err := fmt.Fprintf(w, "  %-*s%s\n", col, head, strings.TrimSpace(l)); err != nil {
				return fmt.Errorf("remedy help: %w", err)
			}
		}
	}
	return nil
}
