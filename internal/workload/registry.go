package workload

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/pflag"
)

// Meta describes a workload for the registry: `erplab run --workload NAME`
// and every other command that builds a workload find it here. Each
// workload package registers its Meta from its init function; the package
// internal/workload/all imports them all.
type Meta struct {
	// Name is the --workload name, e.g. "erp"; unique in the registry.
	Name string
	// Description says in one line what the workload is, for --help.
	Description string
	// DefaultScale is the data scale factor when --scale is not given
	// (> 0).
	DefaultScale float64
	// MaxScale bounds --scale (0: no bound beyond > 0).
	MaxScale float64
	// Flags, when not nil, declares the workload's own options of `run`
	// and `ab` on fs (e.g. erp's --temp-style), with their defaults and
	// help. It is called before parsing; New reads the values after.
	Flags func(fs *pflag.FlagSet)
	// InitFlags, when not nil, declares the workload's own options of
	// `erplab init` on fs (e.g. pgbench's --partitions). A name may appear
	// in both Flags and InitFlags (erp's --separator): it is one option.
	InitFlags func(fs *pflag.FlagSet)
	// New builds the workload from the values of its options: fs holds
	// every flag Flags and InitFlags declared, set to the values given
	// (the others at their defaults). An error is a usage error (a bad
	// option value), said in one line naming the flag.
	New func(fs *pflag.FlagSet) (Workload, error)
}

var registry = struct {
	sync.RWMutex
	m map[string]Meta
}{m: map[string]Meta{}}

// Register adds a workload to the registry; call it from the workload
// package's init function. It panics on an empty name, a nil New, a
// DefaultScale <= 0 or a name registered twice: those are programming
// errors found by the first test that imports the package.
func Register(m Meta) {
	if m.Name == "" || m.New == nil || !(m.DefaultScale > 0) {
		panic(fmt.Sprintf("workload.Register: %q needs a name, New and DefaultScale > 0", m.Name))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[m.Name]; dup {
		panic(fmt.Sprintf("workload.Register: %q registered twice", m.Name))
	}
	registry.m[m.Name] = m
}

// Lookup returns the registered workload of that name.
func Lookup(name string) (Meta, bool) {
	registry.RLock()
	defer registry.RUnlock()
	m, ok := registry.m[name]
	return m, ok
}

// Names returns the registered names, sorted.
func Names() []string {
	all := All()
	out := make([]string, len(all))
	for i, m := range all {
		out[i] = m.Name
	}
	return out
}

// All returns every registered workload, sorted by name.
func All() []Meta {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Meta, 0, len(registry.m))
	for _, m := range registry.m {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Find is Lookup with the error `erplab run` prints for an unknown name:
// `unknown workload "x" (known: erp, pgbench, smoke)`.
func Find(name string) (Meta, error) {
	if m, ok := Lookup(name); ok {
		return m, nil
	}
	return Meta{}, fmt.Errorf("unknown workload %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Help is the --workload help: usage followed by one line per registered
// workload, "name: description".
func Help(usage string) string {
	var b strings.Builder
	b.WriteString(usage)
	for _, m := range All() {
		fmt.Fprintf(&b, "\n  %s: %s", m.Name, m.Description)
	}
	return b.String()
}

// FlagSet returns a fresh flag set holding m's own flags (Flags and
// InitFlags) at their defaults.
func (m Meta) FlagSet() *pflag.FlagSet {
	fs := declare(m.Name, m.Flags)
	fs.AddFlagSet(declare(m.Name, m.InitFlags)) // skips names Flags declared already
	return fs
}

// declare returns a flag set holding what decl declares (nothing for a
// nil decl), visited in declaration order.
func declare(name string, decl func(*pflag.FlagSet)) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	if decl != nil {
		decl(fs)
	}
	return fs
}

// Build returns a new workload of that name with its own options set from
// flags (flag name without dashes -> value as given on a command line,
// e.g. {"temp-style": "lsfusion"}); options not in flags keep their
// defaults. It is what a remedy uses to build the workload of a run with
// one option overridden. Errors: an unknown workload, a flag the workload
// does not declare, a value the flag refuses, or New's usage error.
func Build(name string, flags map[string]string) (Workload, error) {
	m, err := Find(name)
	if err != nil {
		return nil, err
	}
	fs := m.FlagSet()
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if fs.Lookup(k) == nil {
			return nil, fmt.Errorf("workload %s has no option --%s", name, k)
		}
		if err := fs.Set(k, flags[k]); err != nil {
			return nil, fmt.Errorf("--%s: %w", k, err)
		}
	}
	return m.New(fs)
}

// AddFlags declares every registered workload's run options (Meta.Flags)
// on fs, for `run` and `ab`; a name two workloads declare is declared once
// (the first by name wins).
func AddFlags(fs *pflag.FlagSet) {
	for _, m := range All() {
		fs.AddFlagSet(declare(m.Name, m.Flags))
	}
}

// AddInitFlags declares every registered workload's init options
// (Meta.InitFlags) on fs, for `erplab init`, as AddFlags does.
func AddInitFlags(fs *pflag.FlagSet) {
	for _, m := range All() {
		fs.AddFlagSet(declare(m.Name, m.InitFlags))
	}
}

// Values returns the values of m's own flags that were given on fs (the
// parsed command line), by flag name: the flags argument of [Build].
func (m Meta) Values(fs *pflag.FlagSet) map[string]string {
	out := map[string]string{}
	m.FlagSet().VisitAll(func(f *pflag.Flag) {
		if g := fs.Lookup(f.Name); g != nil && g.Changed {
			out[f.Name] = g.Value.String()
		}
	})
	return out
}

// ForeignFlag returns the first flag given on fs that another registered
// workload declares as its own option (run or init) and m does not (e.g.
// pgbench's --partitions with --workload erp, erp's --temp-style with
// --workload smoke), in that workload's declaration order, and the
// workload's name; ok is false when there is none. `erplab init`, `run`
// and `ab` refuse it as a usage error.
func (m Meta) ForeignFlag(fs *pflag.FlagSet) (flag, owner string, ok bool) {
	own := m.FlagSet()
	for _, o := range All() {
		if o.Name == m.Name {
			continue
		}
		theirs := declare(o.Name, o.Flags)
		theirs.AddFlagSet(declare(o.Name, o.InitFlags))
		theirs.VisitAll(func(f *pflag.Flag) {
			if g := fs.Lookup(f.Name); !ok && g != nil && g.Changed && own.Lookup(f.Name) == nil {
				flag, owner, ok = f.Name, o.Name, true
			}
		})
		if ok {
			return flag, owner, true
		}
	}
	return "", "", false
}
