// Package experiment runs A/B experiments (`erplab ab`): a baseline and
// variants, each a set of named remedies (package remedy and its
// registry; ParseVariant), run back to back
// (balanced A B B A, interleaved A B A B or blocked A A B B, for one or
// more rounds) with the same seed, load profile and data on one
// embedded server, then compared with package compare.
//
// Identical starting state: the workload's data is built once into a
// template database (DefaultTemplate, marked by the workload's own marker
// and a COMMENT), and every run starts from CREATE DATABASE run TEMPLATE
// template (sql-createdatabase.html; a file-level copy), dropped after
// the run, so postings in run A cannot change run B's data. By default the
// server is not restarted between runs: runs after the first find the
// template's pages in shared buffers and the OS cache (warm runs); with
// Config.Cold every run starts after a server restart and, as root, with
// the OS page cache dropped.
//
// Each variant's comparison carries its primary rows (Primaries: the
// rows its remedies' registrations declare, or ab --primary), so its
// verdict is Holm over those alone and every other row is exploratory
// (package compare, "Primary and exploratory rows"); the A/A
// comparisons of RunAA take Config.AAPrimary, by default the integral
// APDEX, and count the false primary verdicts.
//
// On a server erplab did not start (Config.External, ab --dsn) the
// template and the run copies are databases erplab_ab_<id>_..., each
// recorded (External.Track) before it is made and dropped after; nothing
// else there is written, and a Cold run is refused unless External.Restart
// is set (--allow-restart on a local server).
//
// Aged state: with Config.Age every run database is aged before its
// measured run by a run of its own (runAge: the load for Age, after the
// remedies, no results, samplers or profile), so nothing the measured
// run records contains the aging; extra.experiment records age_s and
// the aging (Aging).
//
// Remedies are opaque here: a run applies its variant's remedies in order
// to a remedy.Target (the run's cluster and database, the DSN its
// connections use, the workload flag values), builds the workload from
// the target's flags (Config.NewWorkload), runs the load on the target's
// DSN and undoes the remedies in reverse order, also when a remedy, the
// workload or the run fails and when the run is interrupted.
package experiment

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/loadtest"
	"github.com/erplab/erplab/internal/pgcluster"
	"github.com/erplab/erplab/internal/remedy"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/safefile"
	"github.com/erplab/erplab/internal/workload"
)

// BaselineName names the run without remedies.
const BaselineName = "baseline"

// DefaultTemplate is the template database's name.
const DefaultTemplate = "erplab_template"

// templateMarker starts the COMMENT ON DATABASE of a template erplab built.
const templateMarker = "erplab template:"

// Config describes an experiment.
type Config struct {
	// Cluster is the server the runs use (embedded: remedies change its
	// configuration and mounts).
	Cluster *pgcluster.Cluster
	// External, when set, is the server the runs use instead of Cluster
	// (ab --dsn): a server erplab did not start.
	External *External
	// Template is the template database (default DefaultTemplate).
	Template string
	// NewWorkload returns a fresh workload built from workload flag
	// values by flag name: Flags with the run's remedies' overrides
	// (remedy.Target.Flags). It must not keep the map.
	NewWorkload func(flags map[string]string) (workload.Workload, error)
	// Flags are the baseline's workload flag values by flag name (e.g.
	// "temp-style": "1c", "separator": "false"); every run starts from a
	// copy. Flags[TempStyleFlag] is recorded as extra.experiment.temp_style.
	Flags map[string]string
	// Load holds the load parameters every run shares: Scale, Seed,
	// Stages, Warmup, Think, Connections, Interval, Observe, Progress,
	// GracefulStop, MaxErrors, Mix, Version, CommandLine. DSN, Workload
	// and Out are set per run.
	Load loadtest.Options
	// Age, when > 0, ages every run database before its measured run:
	// after the remedies are applied, the load runs for Age (the load
	// profile's peak users, or its peak rate) as a run of its own that
	// is not measured (runAge, Aging); the measured run then starts on
	// the aged catalog and data. extra.experiment records age_s and
	// what the aging did.
	Age time.Duration
	// Variants are the variants; the baseline (no remedies) runs first.
	Variants []Variant
	// Rounds is how many times each configuration runs; 0 takes as many
	// as fit Budget (RoundsFor), and 1 when Budget is 0 too. Balanced
	// orders the runs A B B A A B ... (each round reverses the previous
	// one, so drifts of the machine meet every configuration alike);
	// otherwise Interleave orders them A B A B and neither A A B B.
	Rounds     int
	Budget     time.Duration
	Balanced   bool
	Interleave bool
	// BeforeRun, when set, is called before every run (see RunInfo); an
	// error stops the experiment.
	BeforeRun func(ctx context.Context, run RunInfo) error
	// OutDir receives <name>-<round>.json (+ .jsonl) per run; Run
	// creates it (loadtest.ResultsDir) unless OutRoot is set.
	OutDir string
	// OutRoot, when set, is OutDir held open by the caller (ab's default
	// directory in ./erplab-results, A/A's aa-NN): every run's files are
	// made through it, never by OutDir's path. The caller closes it.
	OutRoot *safefile.Root
	// Cold restarts the server before every run (empty shared buffers)
	// and, when running as root, drops the OS page cache (sync, then
	// /proc/sys/vm/drop_caches = 1; Documentation/admin-guide/sysctl/vm.rst),
	// so cold and warm cache are a parameter, not an accident.
	Cold bool
	// Params are the remedies' parameter values by name
	// (remedy.Kind.Params, e.g. "tmpfs-size": "1G"); a missing one has
	// its registered default.
	Params map[string]string
	// Compare tunes the verdicts; its Primary is set per variant
	// (Primaries).
	Compare compare.Options
	// AAPrimary are the primary rows of RunAA's comparisons (the A/A
	// variant has no remedies); empty: the integral APDEX.
	AAPrimary []compare.Key
}

// RunInfo tells BeforeRun which run comes: the configuration's name, its
// round, its position in the schedule (1-based) and the experiment's
// results directory (Config.OutDir).
type RunInfo struct {
	Variant string
	Round   int
	Seq     int
	Dir     string
}

// RunResult is one run of an experiment.
type RunResult struct {
	Variant  string
	Round    int
	Path     string
	Doc      *results.Document
	Remedies []remedy.Record
}

// Outcome is what Run returns: the runs in the order they ran and the
// comparison of the baseline with each variant over all rounds (with
// one round, of the two runs).
type Outcome struct {
	Rounds      int
	Runs        []RunResult
	Comparisons []*compare.Comparison
}

// RunOverhead is the time a run takes besides its load profile (template
// copy, connections, sampler, results), as RoundsFor assumes it.
const RunOverhead = 5 * time.Second

// MinRounds is the fewest rounds per configuration RoundsFor returns.
const MinRounds = 3

// RoundsFor is how many rounds of configs configurations fit budget when
// one run takes its aging (age), its load profile and RunOverhead: at
// least MinRounds.
func RoundsFor(budget time.Duration, configs int, load loadtest.Options, age time.Duration) int {
	n := int(budget / ((RunLength(load) + age) * time.Duration(max(configs, 1))))
	return max(n, MinRounds)
}

// BuildTemplate creates database name on c and installs w's data into it
// with scale and seed (Setup with Force), then marks it: a COMMENT
// starting with "erplab template:" and IS_TEMPLATE true. It refuses an
// existing database of that name.
func BuildTemplate(ctx context.Context, c *pgcluster.Cluster, name string, w workload.Workload, scale float64, seed uint64, out io.Writer) error {
	if err := c.CreateDatabase(ctx, name); err != nil {
		return fmt.Errorf("template: %w", err)
	}
	return fillTemplate(ctx, embedded{c}, name, w, scale, seed, out)
}

// fillTemplate installs w's data into the new database name on s and
// marks it as BuildTemplate says.
func fillTemplate(ctx context.Context, s server, name string, w workload.Workload, scale float64, seed uint64, out io.Writer) error {
	pool, err := conninfo.OpenPool(ctx, s.DSN(name), 4)
	if err != nil {
		return fmt.Errorf("template: %w", err)
	}
	t0 := time.Now()
	err = w.Setup(ctx, pool, workload.SetupOptions{Scale: scale, Seed: seed, Force: true,
		Progress: func(f string, a ...any) { fmt.Fprintf(out, "template: "+f+"\n", a...) }})
	pool.Close()
	if err != nil {
		return fmt.Errorf("template %s: workload set-up: %w", name, err)
	}
	conn, err := conninfo.Connect(ctx, s.Admin(), "erplab-ab", nil)
	if err != nil {
		return fmt.Errorf("template: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	id := pgx.Identifier{name}.Sanitize()
	comment := fmt.Sprintf("%s workload %s, scale %g, seed %d, built %s", templateMarker, w.Name(), scale, seed, time.Now().UTC().Format(time.RFC3339))
	for _, q := range []string{"COMMENT ON DATABASE " + id + " IS " + quoteLiteral(comment), "ALTER DATABASE " + id + " WITH IS_TEMPLATE true"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("template %s: %w", name, err)
		}
	}
	fmt.Fprintf(out, "template %s built in %s (%s)\n", name, time.Since(t0).Round(100*time.Millisecond), comment)
	return nil
}

// CopyTemplate creates database db as a copy of template (CREATE
// DATABASE db TEMPLATE template). It fails when the template is missing,
// is not marked as erplab's, or has sessions (PostgreSQL refuses to copy
// a database others are connected to).
func CopyTemplate(ctx context.Context, c *pgcluster.Cluster, template, db string) error {
	return copyTemplate(ctx, embedded{c}, template, db, true)
}

// copyTemplate is CopyTemplate on s; marked false copies any database
// (the user's own, ab --template-db).
func copyTemplate(ctx context.Context, s server, template, db string, marked bool) error {
	conn, err := conninfo.Connect(ctx, s.Admin(), "erplab-ab", nil)
	if err != nil {
		return fmt.Errorf("copy template: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var comment *string
	err = conn.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, template).Scan(&comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("copy template: no database %s", template)
	}
	if err != nil {
		return fmt.Errorf("copy template: %w", err)
	}
	if marked && (comment == nil || !strings.HasPrefix(*comment, templateMarker)) {
		return fmt.Errorf("copy template: database %s is not an erplab template (no %q comment)", template, templateMarker)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize()); err != nil {
		return copyError(template, db, err)
	}
	return nil
}

// statsExtensions are the extensions StatsExtensions creates when the
// server preloads their libraries: statement statistics (planning and
// execution per statement, attributed to the key operations by the
// sampler) and the wait-event profile.
var statsExtensions = [...]string{"pg_stat_statements", "pg_wait_sampling"}

// StatsExtensions creates pg_stat_statements and pg_wait_sampling in the
// database of dsn when shared_preload_libraries names them (the
// throwaway server preloads them when installed), so that a run database
// of ab, made and dropped per run, has per-operation planning and
// execution times and waits like erplab run's database.
func StatsExtensions(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("statistics extensions: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var libs string
	if err := conn.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries')`).Scan(&libs); err != nil {
		return fmt.Errorf("statistics extensions: %w", err)
	}
	loaded := map[string]bool{}
	for _, l := range strings.Split(libs, ",") {
		loaded[strings.Trim(strings.TrimSpace(l), `"`)] = true
	}
	for _, ext := range statsExtensions {
		if !loaded[ext] {
			continue
		}
		if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+pgx.Identifier{ext}.Sanitize()); err != nil {
			return fmt.Errorf("statistics extensions: CREATE EXTENSION %s in database %s: %w", ext, conn.Config().Database, err)
		}
	}
	return nil
}

// DropDatabase drops db WITH (FORCE) (closing its sessions), if it exists.
func DropDatabase(ctx context.Context, c *pgcluster.Cluster, db string) error {
	return dropOn(ctx, embedded{c}, db)
}

// Order is the running order of n configurations (index 0 the
// baseline) over rounds, as (configuration index, round) pairs:
// balanced (A B, B A, A B ...) when balanced, else interleaved (A B A B)
// when interleave, else blocked (A A B B); see Config.Rounds.
func Order(n, rounds int, balancedOrder, interleave bool) [][2]int {
	if balancedOrder {
		return balanced(n, rounds)
	}
	return schedule(n, rounds, interleave)
}

// schedule returns the (variant index, round) pairs in running order;
// index 0 is the baseline.
func schedule(n, rounds int, interleave bool) [][2]int {
	var s [][2]int
	if interleave {
		for r := 1; r <= rounds; r++ {
			for i := 0; i < n; i++ {
				s = append(s, [2]int{i, r})
			}
		}
		return s
	}
	for i := 0; i < n; i++ {
		for r := 1; r <= rounds; r++ {
			s = append(s, [2]int{i, r})
		}
	}
	return s
}

// balanced returns the (variant index, round) pairs A B C, C B A, A B C
// ...: round r runs the configurations forwards when odd, backwards when
// even, so every configuration has as many early as late slots
// (counterbalancing; ABBA).
func balanced(n, rounds int) [][2]int {
	var s [][2]int
	for r := 1; r <= rounds; r++ {
		for k := 0; k < n; k++ {
			i := k
			if r%2 == 0 {
				i = n - 1 - k
			}
			s = append(s, [2]int{i, r})
		}
	}
	return s
}

// Run runs the experiment on cfg.Cluster, whose template database must
// exist (BuildTemplate), writing progress to out; it returns the runs and
// comparisons. Each run: copy the template to a run database, apply the
// remedies, run the load (loadtest.Run), record the remedies in the
// results file as extra.remedies, undo the remedies in reverse order and
// drop the run database. It stops at the first failed run (its remedies
// undone) and returns what ran so far with the error.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Outcome, error) {
	if cfg.Cluster == nil && cfg.External == nil || cfg.NewWorkload == nil {
		return nil, errors.New("experiment: no cluster or workload")
	}
	if cfg.Template == "" {
		cfg.Template = DefaultTemplate
	}
	all := append([]Variant{{Name: BaselineName}}, cfg.Variants...)
	if cfg.Rounds <= 0 {
		cfg.Rounds = 1
		if cfg.Budget > 0 {
			cfg.Rounds = RoundsFor(cfg.Budget, len(all), cfg.Load, cfg.Age)
		}
	}
	seen := map[string]bool{}
	for _, v := range all {
		if seen[v.Name] {
			return nil, fmt.Errorf("experiment: variant name %s given twice", v.Name)
		}
		seen[v.Name] = true
	}
	for _, v := range cfg.Variants {
		if _, _, err := Primaries(v); err != nil {
			return nil, fmt.Errorf("experiment: %w", err)
		}
	}
	if cfg.OutRoot == nil {
		d, err := loadtest.ResultsDir(cfg.OutDir)
		if err != nil {
			return nil, fmt.Errorf("experiment: %w", err)
		}
		defer d.Close()
		cfg.OutRoot = d
	}
	oc := &Outcome{Rounds: cfg.Rounds}
	order := Order(len(all), cfg.Rounds, cfg.Balanced, cfg.Interleave)
	for seq, step := range order {
		v, round := all[step[0]], step[1]
		fmt.Fprintf(out, "\n=== %s, round %d of %d (run %d of %d): %s\n", v.Name, round, cfg.Rounds, seq+1, len(order), remedyList(v))
		if cfg.BeforeRun != nil {
			if err := cfg.BeforeRun(ctx, RunInfo{Variant: v.Name, Round: round, Seq: seq + 1, Dir: cfg.OutDir}); err != nil {
				return oc, fmt.Errorf("%s round %d: before the run: %w", v.Name, round, err)
			}
		}
		rr, err := runOne(ctx, cfg, v, round, out)
		if err != nil {
			return oc, fmt.Errorf("%s round %d: %w", v.Name, round, err)
		}
		oc.Runs = append(oc.Runs, *rr)
		if rr.Doc.Status == results.StatusInterrupted {
			return oc, fmt.Errorf("%s round %d: interrupted; results so far: %s", v.Name, round, rr.Path)
		}
	}
	pa, da := oc.side(BaselineName)
	for _, v := range cfg.Variants {
		pb, db := oc.side(v.Name)
		opts, err := compareOptions(cfg, v)
		if err != nil {
			return oc, err
		}
		c, err := compare.CompareRounds(pa, da, pb, db, opts)
		if err != nil {
			return oc, err
		}
		oc.Comparisons = append(oc.Comparisons, c)
	}
	return oc, nil
}

// compareOptions are the options of variant v's comparison with the
// baseline: cfg.Compare with v's primary rows (Primaries). Errors: those
// of Primaries.
func compareOptions(cfg Config, v Variant) (compare.Options, error) {
	opts := cfg.Compare
	var err error
	opts.Primary, opts.PrimarySource, err = Primaries(v)
	return opts, err
}

// side returns the paths and documents of configuration name's runs by
// round.
func (o *Outcome) side(name string) ([]string, []*results.Document) {
	var paths []string
	var docs []*results.Document
	for r := 1; r <= o.Rounds; r++ {
		if rr := o.find(name, r); rr != nil {
			paths, docs = append(paths, rr.Path), append(docs, rr.Doc)
		}
	}
	return paths, docs
}

func (o *Outcome) find(name string, round int) *RunResult {
	for i := range o.Runs {
		if o.Runs[i].Variant == name && o.Runs[i].Round == round {
			return &o.Runs[i]
		}
	}
	return nil
}

func remedyList(v Variant) string {
	if len(v.Remedies) == 0 {
		return "no remedies"
	}
	parts := make([]string, len(v.Remedies))
	for i, r := range v.Remedies {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// Prepared is what InVariant gives its function: the remedy target
// (the run database's DSN, the workload flag values with the remedies'
// overrides), the run database and how its cache started.
type Prepared struct {
	Target   *remedy.Target
	Database string
	Cache    string
}

// InVariant runs fn in variant v's configuration for one round: it
// copies the template to the run database run_<name>_<round>
// (restarting the server first with cfg.Cold), applies v's remedies in
// order, calls fn, undoes the remedies in reverse order on a context
// that is not cancelled (also when a remedy, fn or the context fails)
// and drops the run database. It returns the remedies' records, taken
// after the undo, with fn's error joined to those of the undo and drop.
// An error of the copy or of a remedy's Apply is returned before fn
// runs (records nil).
func InVariant(ctx context.Context, cfg Config, v Variant, round int, out io.Writer, fn func(ctx context.Context, p Prepared) error) (recs []remedy.Record, err error) {
	srv := cfg.server()
	if cfg.Template == "" {
		cfg.Template = DefaultTemplate
	}
	db := cfg.runDatabase(v, round)
	if cfg.External == nil { // a server of erplab's own: an older run's copy may be there
		if err := dropOn(ctx, srv, db); err != nil {
			return nil, err
		}
	} else if cfg.Cold && cfg.External.Restart == nil {
		return nil, errors.New("a cold run restarts the server: not on a server erplab did not start without --allow-restart")
	}
	forget, err := cfg.track(ctx, db)
	if err != nil {
		return nil, err
	}
	cleanup := context.WithoutCancel(ctx)
	drop := func() error {
		if err := dropOn(cleanup, srv, db); err != nil {
			return err
		}
		forget()
		return nil
	}
	if err := copyTemplate(ctx, srv, cfg.Template, db, cfg.External == nil || cfg.External.UserTemplate == ""); err != nil {
		return nil, errors.Join(err, drop())
	}
	if err := StatsExtensions(ctx, srv.DSN(db)); err != nil {
		if cfg.External == nil {
			return nil, errors.Join(err, drop())
		}
		// Your server, your role: CREATE EXTENSION of an untrusted
		// extension needs a superuser; the run goes on without it.
		fmt.Fprintf(out, "note: %v: the run has no statement statistics\n", err)
	}
	cache := "warm (server not restarted between runs)"
	if cfg.Cold {
		restart := func(ctx context.Context) error { return cfg.Cluster.Restart(ctx) }
		if cfg.External != nil {
			restart = cfg.External.Restart
		}
		if err := restart(ctx); err != nil {
			return nil, errors.Join(err, drop())
		}
		cache = "cold: server restarted before the run"
		if err := hostfacts.DropPageCache(""); err == nil {
			cache += ", OS page cache dropped"
		} else {
			cache += ", OS page cache kept (" + err.Error() + ")"
		}
	}
	defer func() {
		if derr := drop(); derr != nil {
			err = errors.Join(err, derr)
		}
	}()

	t := &remedy.Target{Cluster: cfg.Cluster, Database: db, DSN: srv.DSN(db), ServerDSN: srv.DSN(db), Admin: srv.Admin(), DSNAt: srv.DSNAt,
		Flags: make(map[string]string, len(cfg.Flags)), Params: cfg.Params, Log: out}
	if cfg.External != nil {
		t.RecordSettings = cfg.External.TrackSettings
		t.Restart = cfg.External.Restart
		t.RecordTablespace = cfg.External.TrackTablespace
	}
	for k, val := range cfg.Flags {
		t.Flags[k] = val
	}
	// done holds the remedies in effect; undoAll undoes them in reverse
	// order on a context that is not cancelled and empties it.
	var done []*remedy.Applied
	undoAll := func() (err error) {
		for i := len(done) - 1; i >= 0; i-- {
			if uerr := done[i].Undo(cleanup); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}
		done = nil
		return err
	}
	defer func() {
		if uerr := undoAll(); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	for _, r := range v.Remedies {
		a, err := remedy.Apply(ctx, t, r)
		if err != nil {
			return nil, err
		}
		done = append(done, a)
	}
	applied := done
	err = fn(ctx, Prepared{Target: t, Database: db, Cache: cache})
	// Undo now, so the records are complete (proxy counters, settings
	// after the reset) when they are taken.
	if uerr := undoAll(); uerr != nil {
		err = errors.Join(err, uerr)
	}
	recs = []remedy.Record{}
	for _, a := range applied {
		recs = append(recs, a.Record())
	}
	return recs, err
}

// runOne performs one run of variant v.
func runOne(ctx context.Context, cfg Config, v Variant, round int, out io.Writer) (*RunResult, error) {
	var res *loadtest.Result
	var prep Prepared
	var aging *Aging
	recs, runErr := InVariant(ctx, cfg, v, round, out, func(ctx context.Context, p Prepared) error {
		prep = p
		if cfg.Age > 0 {
			var err error
			if aging, err = runAge(ctx, cfg, p, out); err != nil {
				return err
			}
		}
		w, err := cfg.NewWorkload(p.Target.Flags)
		if err != nil {
			return err
		}
		opts := cfg.Load
		opts.DSN, opts.EnvGiven, opts.Force, opts.Keep, opts.OSUser = p.Target.DSN, false, true, false, ""
		opts.Workload = w
		opts.OutRoot, opts.Out = cfg.OutRoot, fmt.Sprintf("%s-%d.json", v.Name, round)
		res, err = loadtest.Run(ctx, opts, out)
		return err
	})
	if res == nil {
		return nil, runErr
	}
	rr := &RunResult{Variant: v.Name, Round: round, Path: res.Path, Doc: res.Doc, Remedies: recs}
	if len(recs) == 0 {
		rr.Remedies = nil
	}
	exp := Experiment{Variant: v.Name, Round: round, Database: prep.Database, Template: "CREATE DATABASE " + prep.Database + " TEMPLATE " + cfg.Template,
		TempStyle: prep.Target.Flags[TempStyleFlag], Cache: prep.Cache, AgeS: cfg.Age.Seconds(), Aging: aging}
	copts := cfg.Compare
	if v.Name != BaselineName {
		var perr error
		if copts, perr = compareOptions(cfg, v); perr != nil {
			return rr, errors.Join(runErr, perr)
		}
	}
	recipe := compare.RecipeOf(copts)
	exp.Compare = &recipe
	if werr := writeRemedies(res.Doc, cfg.OutRoot, filepath.Base(res.Path), cmp.Or(cfg.Load.OutMode, results.DefaultPerm), exp, rr.Remedies); werr != nil {
		runErr = errors.Join(runErr, werr)
	}
	return rr, runErr
}

// TempStyleFlag is the workload flag whose run value extra.experiment
// records as temp_style ("" for a workload without it).
const TempStyleFlag = "temp-style"

// Experiment is the results section extra.experiment.
type Experiment struct {
	Variant   string `json:"variant"`
	Round     int    `json:"round"`
	Database  string `json:"database"`
	Template  string `json:"template_copy"`
	TempStyle string `json:"temp_style"`
	Cache     string `json:"cache"`
	// AgeS is Config.Age in seconds (0: the run database was not aged);
	// Aging is what the aging run did.
	AgeS  float64 `json:"age_s"`
	Aging *Aging  `json:"aging,omitempty"`
	// Compare is what this run's comparison with the baseline is
	// computed with (primary rows: the variant's, none for the
	// baseline), so that erplab report repeats ab's verdict.
	Compare *compare.Recipe `json:"compare,omitempty"`
}

// writeRemedies adds extra.remedies and extra.experiment to the results
// document and rewrites the file name in dir (loadtest wrote it), with
// mode perm.
func writeRemedies(doc *results.Document, dir *safefile.Root, name string, perm fs.FileMode, exp Experiment, recs []remedy.Record) error {
	if recs == nil {
		recs = []remedy.Record{}
	}
	if doc.Extra == nil {
		doc.Extra = map[string]json.RawMessage{}
	}
	b, err := json.Marshal(recs)
	if err != nil {
		return fmt.Errorf("remedies: %w", err)
	}
	doc.Extra["remedies"] = b
	b, err = json.Marshal(exp)
	if err != nil {
		return fmt.Errorf("remedies: %w", err)
	}
	doc.Extra["experiment"] = b
	return results.ReplaceJSONIn(dir, name, doc, perm)
}

// Remedies reads extra.remedies of a results document (nil when absent).
func Remedies(doc *results.Document) ([]remedy.Record, error) {
	raw, ok := doc.Extra["remedies"]
	if !ok {
		return nil, nil
	}
	var recs []remedy.Record
	if err := json.Unmarshal(raw, &recs); err != nil {
		return nil, fmt.Errorf("results: extra.remedies: %w", err)
	}
	return recs, nil
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
