// Package thp is the remedy thp:never|madvise|always: the host's
// transparent huge pages mode (the kernel's transparent_hugepage/enabled,
// and with the remedy parameters thp-defrag and thp-shmem its defrag and
// shmem_enabled) set for one run and set back after it, so that `erplab
// ab` compares the database under each mode (docs CONTEXT.md section 4:
// `echo never > .../enabled` halved a shop's system CPU).
//
// # What is set, and when it matters
//
// enabled governs private anonymous memory: what a backend allocates
// for itself (sorts, hashes, catalog caches, temp buffers); shmem_enabled
// governs shared memory, i.e. PostgreSQL's shared_buffers mapping (left
// as it is unless thp-shmem says otherwise); defrag says whether a fault
// stalls to compact memory for a huge page (left as it is unless
// thp-defrag says otherwise). The per-size hugepages-<N>kB/enabled files
// of Linux 6.8+ are left alone: those at "inherit" follow enabled.
//
// The kernel applies the mode to memory faulted in after the change;
// what a process mapped before keeps its pages. So Apply restarts the
// server once the files are written (ab's own server, or a --dsn server
// with --allow-restart; none other is taken): the postmaster, its shared
// memory and every backend start under the mode. A restart empties
// shared buffers, so the remedy needs cold runs (Kind.NeedsCold; ab
// --cold): every run, the baseline's too, then starts after a restart.
// In ab's order (experiment.InVariant) a cold run restarts the server
// before the remedies apply and this remedy restarts it again after its
// write; Undo writes the previous modes back, and the next run's cold
// restart starts the server under them (a --dsn server is restarted by
// Undo itself, so it is left running under its own modes).
//
// # Crash safety
//
// Before each file is written, its previous mode and the mode about to
// be set are recorded in erplab's crash-safe record (package leftover,
// kind "thp", one entry per file); Undo removes the entry once the file
// reads its previous mode again. After a kill -9 of ab the next erplab
// command's sweep writes the previous mode back when the file still
// reads the mode erplab set (a file someone changed since is left, with
// a line saying so).
package thp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/leftover"
	"github.com/erplab/erplab/internal/remedy"
)

// Name is the remedy's name on the command line.
const Name = "thp"

// The remedy parameters (ab --thp-defrag, --thp-shmem): the defrag and
// shmem_enabled modes set while a thp remedy is applied; "" (default)
// leaves the file as it is.
const (
	DefragParam = "thp-defrag"
	ShmemParam  = "thp-shmem"
)

// kindTHP is the leftover kind of one changed choice file.
const kindTHP = "thp"

func init() {
	remedy.Register(remedy.Kind{
		Name:   Name,
		Syntax: "thp:never|madvise|always",
		Doc: "the host's transparent huge pages mode (transparent_hugepage/enabled) for the run, set back after;\n" +
			"the server is restarted under it (see --thp-defrag, --thp-shmem)",
		NeedsRoot: "it writes the kernel's transparent_hugepage files",
		NeedsCold: "THP applies to memory mapped after the change",
		Params: []remedy.Param{
			{Name: DefragParam, Usage: "transparent_hugepage/defrag while a thp remedy is applied (" + strings.Join(hostfacts.THPChoices["defrag"], ", ") + "; default: left as it is)",
				Check: func(v string) error { return checkParam("defrag", v) }},
			{Name: ShmemParam, Usage: "transparent_hugepage/shmem_enabled (shared_buffers' mapping) while a thp remedy is applied (" + strings.Join(hostfacts.THPChoices["shmem_enabled"], ", ") + "; default: left as it is)",
				Check: func(v string) error { return checkParam("shmem_enabled", v) }},
		},
		Parse:     func(arg string) error { return hostfacts.CheckTHPChoice("enabled", arg) },
		Preflight: func(string) error { return present("", "enabled") },
		Apply:     applyRemedy,
		Undo:      undoRemedy,
	})
	leftover.Register(leftover.Kind{Name: kindTHP, Undo: sweep})
}

// checkParam checks a remedy parameter's value: "" or a mode of file.
func checkParam(file, v string) error {
	if v == "" {
		return nil
	}
	return hostfacts.CheckTHPChoice(file, v)
}

// present refuses, in one line, a host without the choice files.
func present(sysRoot string, files ...string) error {
	for _, f := range files {
		v := hostfacts.ReadTHP(sysRoot, f)
		switch {
		case v.Absent():
			return fmt.Errorf("%s is absent: this kernel has no transparent huge pages, or its sysfs is not visible here", v.Path)
		case v.Err != nil:
			return v.Err
		}
	}
	return nil
}

// change is one choice file set by the remedy: its mode before and the
// mode set, with the leftover entry recording it (nil when the file
// already read Value and nothing was written).
type change struct {
	File     string `json:"file"`
	Previous string `json:"previous"`
	Value    string `json:"value"`
	entry    *leftover.Entry
}

// set writes each want (file -> mode, in order) under sysRoot, each
// recorded in rec before it is written; on an error it sets back what it
// wrote and returns the error.
func set(rec *leftover.Record, sysRoot string, wants [][2]string, log io.Writer) ([]*change, error) {
	var done []*change
	fail := func(err error) ([]*change, error) {
		return nil, errors.Join(err, restore(rec, sysRoot, done, log))
	}
	for _, w := range wants {
		if err := present(sysRoot, w[0]); err != nil {
			return fail(err)
		}
		prev := hostfacts.ReadTHP(sysRoot, w[0])
		c := &change{File: w[0], Previous: prev.Mode, Value: w[1]}
		if c.Previous == c.Value {
			fmt.Fprintf(log, "thp: %s is %s already\n", c.File, c.Value)
			done = append(done, c)
			continue
		}
		e, err := rec.Add(kindTHP, prev.Path, c)
		if err != nil {
			return fail(err)
		}
		c.entry = e
		done = append(done, c)
		if err := hostfacts.SetTHP(sysRoot, c.File, c.Value); err != nil {
			return fail(err)
		}
		fmt.Fprintf(log, "thp: %s %s -> %s\n", c.File, c.Previous, c.Value)
	}
	return done, nil
}

// restore sets back the files of cs, newest first, and removes their
// entries; a file someone changed since is left (a line on log).
func restore(rec *leftover.Record, sysRoot string, cs []*change, log io.Writer) error {
	var errs error
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		if c.entry == nil {
			continue
		}
		what, err := restoreOne(sysRoot, *c)
		if err != nil {
			errs = errors.Join(errs, err)
			continue
		}
		if what != "" {
			fmt.Fprintf(log, "thp: %s %s\n", c.File, what)
		}
		if err := rec.Remove(c.entry); err != nil {
			errs = errors.Join(errs, err)
		}
	}
	return errs
}

// restoreOne writes c.Previous back when the file reads c.Value, and
// says what it did ("" when it already reads c.Previous).
func restoreOne(sysRoot string, c change) (string, error) {
	v := hostfacts.ReadTHP(sysRoot, c.File)
	switch {
	case v.Absent():
		return "gone (no file to set back)", nil
	case v.Err != nil:
		return "", v.Err
	case v.Mode == c.Previous:
		return "", nil
	case v.Mode != c.Value:
		return fmt.Sprintf("left at %s: changed since erplab set %s (it was %s)", v.Mode, c.Value, c.Previous), nil
	}
	if err := hostfacts.SetTHP(sysRoot, c.File, c.Previous); err != nil {
		return "", err
	}
	return fmt.Sprintf("set back from %s to %s", c.Value, c.Previous), nil
}

// sweep is the leftover Undo of a kind "thp" entry: restoreOne from the
// recorded change, on the live host.
func sweep(_ context.Context, e leftover.Entry) (string, error) {
	var c change
	if json.Unmarshal(e.Data, &c) != nil || hostfacts.CheckTHPChoice(c.File, c.Previous) != nil || hostfacts.CheckTHPChoice(c.File, c.Value) != nil {
		return "", fmt.Errorf("unreadable entry: %w", leftover.ErrNotOurs)
	}
	return restoreOne("", c)
}

// applied is the remedy's Effect.State.
type applied struct {
	rec     *leftover.Record
	changes []*change
}

// restarter is how the remedy restarts the target's server: ab's own
// cluster, or a --dsn server with --allow-restart (Target.Restart).
func restarter(t *remedy.Target) (func(context.Context) error, error) {
	switch {
	case t.Cluster != nil:
		return t.Cluster.Restart, nil
	case t.Restart != nil:
		return t.Restart, nil
	}
	return nil, errors.New("the server must start under the mode: on a --dsn server ab needs --allow-restart (a server on this host)")
}

// applyRemedy sets enabled to arg (and defrag, shmem_enabled as the
// parameters say), then restarts the server under them.
func applyRemedy(ctx context.Context, t *remedy.Target, arg string) (*remedy.Effect, error) {
	restart, err := restarter(t)
	if err != nil {
		return nil, fmt.Errorf("remedy %s: %w", Name, err)
	}
	wants := [][2]string{{"enabled", arg}}
	if v := t.Param(DefragParam); v != "" {
		wants = append(wants, [2]string{"defrag", v})
	}
	if v := t.Param(ShmemParam); v != "" {
		wants = append(wants, [2]string{"shmem_enabled", v})
	}
	rec, err := leftover.Open()
	if err != nil {
		return nil, fmt.Errorf("remedy %s: %w", Name, err)
	}
	cs, err := set(rec, "", wants, t.Log)
	if err != nil {
		return nil, fmt.Errorf("remedy %s: %w", Name, err)
	}
	if err := restart(ctx); err != nil {
		return nil, fmt.Errorf("remedy %s: restart under the mode: %w", Name, errors.Join(err, restore(rec, "", cs, t.Log)))
	}
	fmt.Fprintf(t.Log, "thp: server restarted under enabled=%s\n", arg)
	changed := map[string]any{"server_restarted": true}
	for _, c := range cs {
		changed[c.File] = map[string]string{"previous": c.Previous, "set": c.Value}
	}
	return &remedy.Effect{Changed: changed, State: &applied{rec: rec, changes: cs}}, nil
}

// undoRemedy records the huge pages in use at the end of the run (the
// mode's evidence), sets the files back and, on a --dsn server, restarts
// it under its own modes.
func undoRemedy(ctx context.Context, t *remedy.Target, e *remedy.Effect) error {
	a := e.State.(*applied)
	if fs, err := hostfacts.New("", ""); err == nil {
		if mi, err := fs.Meminfo(); err == nil {
			if mi.AnonHugePages != nil {
				e.Changed["host_anon_huge_pages_kb_at_end"] = *mi.AnonHugePages
			}
			if mi.ShmemHugePages != nil {
				e.Changed["host_shmem_huge_pages_kb_at_end"] = *mi.ShmemHugePages
			}
		}
	}
	if err := restore(a.rec, "", a.changes, t.Log); err != nil {
		return fmt.Errorf("remedy %s: undo: %w", Name, err)
	}
	if t.Cluster == nil && t.Restart != nil {
		if err := t.Restart(ctx); err != nil {
			return fmt.Errorf("remedy %s: undo: restart under the previous mode: %w", Name, err)
		}
		e.Changed["server_restarted_after"] = true
	}
	e.Changed["undone"] = true
	return nil
}
