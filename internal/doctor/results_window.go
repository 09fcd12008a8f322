package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/erplab/erplab/internal/profile"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/top"
)

// DefaultResultsWindow is the window doctor --results judges: the minutes
// before --at.
const DefaultResultsWindow = 5 * time.Minute

// ResultsOptions configure RunResults.
type ResultsOptions struct {
	// Path is a run's results: its document (X.json) or a killed run's
	// stream (X.jsonl), read with results.Read.
	Path string
	// At names the window's end: a time since the run's start ("41m",
	// "2h5m", "90s") or a clock time of the run's day ("12:03:05"), as
	// top --play's --at.
	At string
	// Window is the window's length before At (DefaultResultsWindow when
	// 0).
	Window time.Duration
	// Only and Skip select among the window-* checks as Options' do.
	Only, Skip []string
}

// WindowInfo is the window of a run's results the report judges; the
// rest of the run before it is what each finding compares with.
type WindowInfo struct {
	File      string    `json:"file"`
	StartedAt time.Time `json:"started_at"`
	// RunS is the run's length as its results record it; FromS and ToS
	// bound the window, seconds since the start; the run's part before it
	// (0 to FromS) is the comparison.
	RunS  float64 `json:"run_s"`
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	// Cause is the window's cause as the findings name it, in one line.
	Cause string `json:"cause"`
	// NotRecorded says what the results do not keep per time (e.g. a
	// run without observations).
	NotRecorded []string `json:"not_recorded,omitempty"`
}

// windowFacts is what the window-* checks read: the run's results, its
// observations (nil: obsWhy says why), its observed invalidation counts
// (nil: invalWhy), and the window.
type windowFacts struct {
	file          string
	doc           *results.Document
	obs           *sampler.Observations
	obsWhy        string
	inval         *profile.Invalidation
	invalWhy      string
	from, to, end float64
}

// isWindow reports whether c judges a window of a run's results (section
// secWindow): those run only under RunResults.
func (c Check) isWindow() bool { return c.order > secWindow && c.order < secWindow+100 }

// RunResults runs the window-* checks on the window of a run's results
// that ends at opts.At: each finding quotes the window's figures and
// compares them with the run before it, and Report.Window.Cause names
// the cause. It needs no server. Errors: a file that does not read, a
// malformed or out-of-run At (one line naming the run's span), a bad
// window or selection.
func RunResults(ctx context.Context, opts ResultsOptions) (*Report, error) {
	checks, err := selectChecks(opts.Only, opts.Skip)
	if err != nil {
		return nil, err
	}
	checks = slices.DeleteFunc(checks, func(c Check) bool { return !c.isWindow() })
	if len(checks) == 0 {
		return nil, errors.New("--only/--skip leave no window-* check to run (doctor --results runs only those)")
	}
	if opts.Window == 0 {
		opts.Window = DefaultResultsWindow
	}
	if opts.Window < 0 {
		return nil, &WindowError{fmt.Errorf("--window must be > 0, got %s", opts.Window)}
	}
	w, err := readWindow(opts)
	if err != nil {
		return nil, err
	}
	e := &env{win: w, hostWhy: "a server (doctor --results judges recorded figures only)"}
	if w.obs != nil {
		e.srv = ServerInfo{Version: w.obs.Server.Version, VersionNum: w.obs.Server.VersionNum, Database: w.obs.Server.Database, Local: w.obs.Server.Local}
	}
	rep, err := e.report(ctx, checks)
	if err != nil {
		return nil, err
	}
	rep.Window = &WindowInfo{File: opts.Path, StartedAt: w.doc.StartedAt, RunS: w.end, FromS: w.from, ToS: w.to, Cause: windowCause(rep)}
	if w.obs == nil {
		rep.Window.NotRecorded = append(rep.Window.NotRecorded, w.obsWhy)
	}
	return rep, nil
}

// WindowError is RunResults' error for a bad --at or --window: a
// malformed time, one outside the run, a window that is not positive.
type WindowError struct{ Err error }

func (e *WindowError) Error() string { return e.Err.Error() }
func (e *WindowError) Unwrap() error { return e.Err }

// readWindow reads the results and resolves the window.
func readWindow(opts ResultsOptions) (*windowFacts, error) {
	doc, err := results.Read(opts.Path)
	if err != nil {
		return nil, err
	}
	w := &windowFacts{file: opts.Path, doc: doc}
	w.obs, err = sampler.ObservationsOf(doc)
	switch {
	case errors.Is(err, sampler.ErrNoObservations):
		w.obsWhy = "the run's observations (sessions, waits, storms, catalogs, xmin horizon), which these results do not hold (a run with --observe=false; a killed run's stream written before erplab streamed the samples, which keeps the load's intervals only)"
	case err != nil:
		return nil, fmt.Errorf("%s: %w", opts.Path, err)
	}
	w.readInvalidation()
	for _, iv := range doc.Series {
		w.end = max(w.end, iv.T)
	}
	if w.obs != nil {
		for _, s := range w.obs.Series {
			w.end = max(w.end, s.T)
		}
	}
	if w.end <= 0 {
		return nil, fmt.Errorf("%s: the results hold no interval or sample to judge", opts.Path)
	}
	t0 := doc.StartedAt
	last := t0.Add(time.Duration(w.end * float64(time.Second)))
	target, _, err := top.When(opts.At, "run", t0, last, t0.Location())
	span := fmt.Sprintf("the run goes from %s to %s (+%s)", t0.Format(time.TimeOnly), last.Format(time.TimeOnly), fmtT(w.end))
	if err != nil {
		return nil, &WindowError{fmt.Errorf("--at %w: %s", err, span)}
	}
	w.to = math.Round(target.Sub(t0).Seconds())
	switch {
	case w.to <= 0:
		return nil, &WindowError{fmt.Errorf("--at %q is at or before the run's start: %s", opts.At, span)}
	case w.to > w.end+1:
		return nil, &WindowError{fmt.Errorf("--at %q is after the run's end: %s", opts.At, span)}
	}
	w.to = min(w.to, w.end)
	w.from = max(0, w.to-opts.Window.Seconds())
	return w, nil
}

// readInvalidation reads extra.invalidation's observed counts.
func (w *windowFacts) readInvalidation() {
	raw, ok := w.doc.Extra["invalidation"]
	if !ok {
		w.invalWhy = "shared-invalidation counts (run --probes: root and a local server), which these results do not hold"
		return
	}
	var r profile.InvalResult
	if err := json.Unmarshal(raw, &r); err != nil {
		w.invalWhy = "shared-invalidation counts: extra.invalidation: " + err.Error()
		return
	}
	if r.Observed == nil || len(r.Observed.Series) == 0 {
		w.invalWhy = "shared-invalidation counts per second, which the run could not take: " + r.Unavailable
		return
	}
	w.inval = r.Observed
}

// span is the window as "36m-41m".
func (w *windowFacts) span() string { return fmtT(w.from) + "-" + fmtT(w.to) }

// beforeSpan is the run's part before the window, "0s-36m"; "" when the
// window starts with the run.
func (w *windowFacts) beforeSpan() string {
	if w.from <= 0 {
		return ""
	}
	return "0s-" + fmtT(w.from)
}

// samples are the observations' samples in the window (before false) or
// before it (before true).
func (w *windowFacts) samples(before bool) []sampler.Sample {
	if w.obs == nil {
		return nil
	}
	var out []sampler.Sample
	for _, s := range w.obs.Series {
		if (before && s.T < w.from) || (!before && s.T >= w.from && s.T <= w.to) {
			out = append(out, s)
		}
	}
	return out
}

// from is the evidence's origin in the results.
func (w *windowFacts) source(section string) string { return w.file + ": " + section }

// fmtT formats seconds since the start as 45s, 41m, 1m10s, 2h05m, 2h05m10s.
func fmtT(s float64) string {
	d := time.Duration(math.Round(s)) * time.Second
	h, m, sec := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0 && sec == 0:
		return fmt.Sprintf("%dh%02dm", h, m)
	case h > 0:
		return fmt.Sprintf("%dh%02dm%02ds", h, m, sec)
	case m > 0 && sec == 0:
		return fmt.Sprintf("%dm", m)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, sec)
	}
	return fmt.Sprintf("%ds", sec)
}

// windowCause is the cause the findings name: the worst finding of a
// cause check (every window check but window-apdex, the symptom), first
// in report order among equals; else what the symptom says.
func windowCause(rep *Report) string {
	var best *Finding
	for i := range rep.Findings {
		f := &rep.Findings[i]
		if f.ID == "window-apdex" || f.Severity.rank() < Info.rank() {
			continue
		}
		if best == nil || f.Severity.rank() > best.Severity.rank() {
			best = f
		}
	}
	if best != nil {
		return fmt.Sprintf("%s (%s)", best.Summary, best.ID)
	}
	if f := rep.Find("window-apdex"); f != nil && f.Severity.rank() >= Info.rank() {
		return "none recorded: " + f.Summary + ", but no recorded evidence in the window names a cause"
	}
	return "none: no finding in the window"
}

// ratio formats b against a as "x3.4" ("new" when a is 0).
func ratio(a, b float64) string {
	if a <= 0 {
		return "new"
	}
	return fmt.Sprintf("x%.1f", b/a)
}
