package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/results"
)

type mergeFlags struct {
	out, dir     string
	outMode      fs.FileMode
	runID        string
	allowPartial bool
	wait         time.Duration
	apdexMin     float64
}

func newMergeCmd() *cobra.Command {
	var f mergeFlags
	cmd := &cobra.Command{
		Use:   "merge FILE... | DIR -o OUT",
		Short: "Merge the segment results of a run split over several load machines into one run",
		Long: `Merge the results documents of the segments of one run (erplab run --segment I/N on N
agents) into one document: every operation's histograms (response, pool wait, database,
lag) and APDEX zone counts are added, and every percentile, the APDEX, the integral APDEX,
the totals, the time series and the per-stage figures are computed from them, exactly as
one machine would have. compare and report read the merged run like any other.

It refuses, in one line, a document that is not a segment, of another run id,
configuration hash or server (system identifier and database; a foreign segment), a
segment given twice, segments that overlap or leave a gap, OUT naming one of the inputs
or any existing file (OUT is always a new file; an existing directory takes <run-id>.json),
and a missing or incomplete segment (late start, restart, lost server, interrupt) unless
--allow-partial, which says so in the document and the summary. A restarted segment
given with its earlier attempts is incomplete; --allow-partial uses one attempt (the
latest completed one, else the latest) and notes which.

With a directory (DIR or --dir DIR) it reads every segment document in it (a killed
agent's stream too) except OUT; --wait D waits up to D until all N segments of the run
are there, or one is marked incomplete.

Exit codes: 0 merged, 1 refused (foreign, duplicated or overlapping segments), 2 bad
usage (OUT an existing file too), 6 an incomplete set without --allow-partial (nothing written; a failed segment
is incomplete), 8 every attempt of every key operation in the merged segments failed (the
document is written, status failed), 99 the merged
integral APDEX below --apdex-min.`,
		Example: `  erplab merge erplab-results/r42-*of3.json -o r42.json
  erplab merge --wait 30m --dir /results -o /results/run.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.out == "" {
				return withCode(exitUsage, errors.New("merge: give the merged document's path with -o OUT"))
			}
			if f.dir != "" {
				args = append(args, f.dir)
			}
			if len(args) == 0 {
				return withCode(exitUsage, errors.New("merge: give the segment documents (FILE...) or their directory (DIR or --dir DIR)"))
			}
			dir := ""
			if len(args) == 1 {
				if st, err := os.Stat(args[0]); err == nil && st.IsDir() {
					dir = args[0]
				}
			}
			if f.wait < 0 {
				return withCode(exitUsage, fmt.Errorf("--wait must not be negative, got %s", f.wait))
			}
			if f.wait > 0 && dir == "" {
				return withCode(exitUsage, errors.New("--wait applies to a directory (DIR or --dir DIR)"))
			}
			if f.runID != "" && dir == "" {
				return withCode(exitUsage, errors.New("--run-id applies to a directory (DIR or --dir DIR); the files given are merged as they are"))
			}
			if f.apdexMin < 0 || f.apdexMin > 1 {
				return withCode(exitUsage, fmt.Errorf("--apdex-min must be between 0 and 1, got %g", f.apdexMin))
			}
			if err := checkMergeOut(f.out, args, dir); err != nil {
				return withCode(exitUsage, err)
			}
			w := cmd.OutOrStdout()
			var (
				docs  []*results.Document
				files []string
				err   error
			)
			if dir != "" {
				docs, files, err = readSegmentDir(cmd.Context(), dir, f.out, f.runID, f.wait, cmd.ErrOrStderr())
			} else {
				docs, files, err = readSegmentFiles(args)
			}
			if err != nil {
				return err
			}
			t0 := time.Now()
			merged, err := results.Merge(docs, results.MergeOptions{AllowPartial: f.allowPartial, Files: files})
			if errors.Is(err, results.ErrIncomplete) {
				return fmt.Errorf("%w; nothing written", err)
			}
			if err != nil {
				return err
			}
			took := time.Since(t0)
			out := f.out
			if st, err := os.Stat(out); err == nil && st.IsDir() {
				out = filepath.Join(out, merged.RunID+".json") // segments have run ids
			}
			if err := merged.WriteFile(out, f.outMode); err != nil {
				return err
			}
			printMerged(w, merged, out, took)
			if why, failed := merged.Status.Reason(results.StatusFailed); failed {
				return withCode(exitRunFailed, fmt.Errorf("merge: the merged run failed: %s (written: %s)", why, out))
			}
			if cmd.Flags().Changed("apdex-min") {
				return checkApdexMin(merged.Integral, f.apdexMin)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.out, "out", "o", "", "the merged document to write, a new file, or an existing directory for <run-id>.json (required)")
	addOutModeFlag(fl, &f.outMode)
	fl.StringVar(&f.dir, "dir", "", "read the segment documents of the directory DIR")
	fl.StringVar(&f.runID, "run-id", "", "with a directory: read only the segments of this run (a results volume reused by several runs)")
	fl.BoolVar(&f.allowPartial, "allow-partial", false, "merge an incomplete set (segments missing or marked incomplete); the document and summary say so")
	fl.DurationVar(&f.wait, "wait", 0, "with a directory: wait up to this long until all N segments are there (or one is marked incomplete)")
	fl.Float64Var(&f.apdexMin, "apdex-min", 0, "exit with code 99 when the merged integral APDEX is below this")
	return cmd
}

// checkMergeOut refuses an -o naming an existing file (merge writes a new
// file only, never over its input or anything else) in one line saying
// what it is: one of the segment documents given (inputs) or in the
// segment directory dir, a symbolic link, another file. An existing
// directory is taken: the document goes into it as <run-id>.json.
func checkMergeOut(out string, inputs []string, dir string) error {
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return nil
	}
	st, err := os.Lstat(out)
	if err != nil {
		return nil
	}
	if dir == "" {
		for _, a := range inputs {
			if sameFile(a, out) {
				return fmt.Errorf("merge: -o %s is one of the segment documents (%s): give a new file's name, merge does not overwrite its input", out, a)
			}
		}
	} else if sameFile(filepath.Dir(out), dir) {
		return fmt.Errorf("merge: -o %s is a file of the segment directory %s, the input: give a new file's name, merge does not overwrite its input", out, dir)
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("merge: -o %s is a symbolic link: give a new file's name, merge writes no existing file", out)
	}
	return fmt.Errorf("merge: -o %s exists: give a new file's name, merge writes no existing file", out)
}

// sameFile reports whether a and b name one file: os.SameFile when both
// exist, else their cleaned absolute paths are equal.
func sameFile(a, b string) bool {
	sa, ea := os.Stat(a)
	sb, eb := os.Stat(b)
	if ea == nil && eb == nil {
		return os.SameFile(sa, sb)
	}
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == ab
}

// readSegmentFiles reads the named documents.
func readSegmentFiles(paths []string) ([]*results.Document, []string, error) {
	var docs []*results.Document
	for _, p := range paths {
		d, err := results.Read(p)
		if err != nil {
			return nil, nil, err
		}
		docs = append(docs, d)
	}
	return docs, paths, nil
}

// staleStream is how long a stream without a document may go unwritten
// before merge --wait takes its agent for dead: a running agent appends
// an interval every --interval.
const staleStream = time.Minute

// readSegmentDir reads the segment documents in dir (X.json, and the
// stream X.jsonl of an agent that left no X.json: a killed one, read as
// rebuilt), skipping out and documents that are not segments. With
// wait > 0 it looks again every second until the complete documents
// (X.json) cover every piece of the run, or one is marked incomplete (a
// stream with a header left unwritten for staleStream counts, as a
// killed agent's), or wait has passed; the other streams count only
// once the wait is over. runID, if not "", keeps only that run's
// documents (others are skipped silently: a reused results volume).
func readSegmentDir(ctx context.Context, dir, out, runID string, wait time.Duration, errw io.Writer) ([]*results.Document, []string, error) {
	deadline := time.Now().Add(wait)
	absOut, _ := filepath.Abs(out)
	skipped := map[string]bool{}
	for {
		docs, files, streams, err := scanSegmentDir(dir, absOut, runID, skipped, errw)
		if err != nil {
			return nil, nil, err
		}
		var dead []*results.Document
		for _, p := range streams {
			if st, err := os.Stat(p); err == nil && st.Size() > 0 && time.Since(st.ModTime()) > staleStream {
				if d, err := results.Read(p); err == nil && d.Segment != nil && (runID == "" || d.RunID == runID) {
					dead = append(dead, d)
				}
			}
		}
		if wait <= 0 || segmentsDone(append(docs, dead...)) || !time.Now().Before(deadline) {
			for _, p := range streams {
				d, err := results.Read(p)
				if err != nil {
					fmt.Fprintf(errw, "merge: skipping %s: %v\n", p, err)
					continue
				}
				if d.Segment != nil && (runID == "" || d.RunID == runID) {
					docs, files = append(docs, d), append(files, p)
				}
			}
			if len(docs) == 0 {
				return nil, nil, fmt.Errorf("merge: no segment documents in %s", dir)
			}
			return docs, files, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, withCode(exitInterrupted, errors.New("merge: interrupted while waiting for the segments"))
		case <-time.After(time.Second):
		}
	}
}

// scanSegmentDir reads dir's complete segment documents and lists the
// streams that have no document.
func scanSegmentDir(dir, absOut, runID string, skipped map[string]bool, errw io.Writer) (docs []*results.Document, files, streams []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("merge: %w", err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		p := filepath.Join(dir, n)
		if abs, _ := filepath.Abs(p); abs == absOut || strings.HasPrefix(n, ".") {
			continue
		}
		switch {
		case strings.HasSuffix(n, ".json"):
			d, err := results.Read(p)
			if err != nil {
				if !skipped[p] {
					fmt.Fprintf(errw, "merge: skipping %s: %v\n", p, err)
					skipped[p] = true
				}
				continue
			}
			if d.Segment == nil {
				if !skipped[p] {
					fmt.Fprintf(errw, "merge: skipping %s: not a segment of a run\n", p)
					skipped[p] = true
				}
				continue
			}
			if runID != "" && d.RunID != runID {
				continue
			}
			docs, files = append(docs, d), append(files, p)
		case strings.HasSuffix(n, ".jsonl") && !names[strings.TrimSuffix(n, ".jsonl")+".json"]:
			streams = append(streams, p)
		}
	}
	return docs, files, streams, nil
}

// segmentsDone reports whether the documents are every piece of their
// run, or one of them is marked incomplete (waiting longer would not
// make the set whole).
func segmentsDone(docs []*results.Document) bool {
	if len(docs) == 0 {
		return false
	}
	for _, d := range docs {
		if len(d.Segment.Incomplete) > 0 || d.Status != results.StatusCompleted {
			return true
		}
	}
	_, err := results.Merge(docs, results.MergeOptions{})
	return !errors.Is(err, results.ErrIncomplete)
}

// printMerged prints the merge's summary.
func printMerged(w io.Writer, d *results.Document, out string, took time.Duration) {
	m := d.Merged
	fmt.Fprintf(w, "merged run %s: %d of %d segments, config %s, %s\n", d.RunID, len(m.Segments), m.Count, d.ConfigHash, d.Status)
	for _, s := range m.Segments {
		cpu := ""
		if s.Agent != nil {
			cpu = fmt.Sprintf(", agent CPU %.0f%% of %d cores", s.Agent.Utilization*100, s.Agent.Cores)
			if s.Agent.Saturated {
				cpu += " SATURATED"
			}
		}
		inc := ""
		if len(s.Incomplete) > 0 {
			inc = " INCOMPLETE: " + strings.Join(s.Incomplete, "; ")
		}
		fmt.Fprintf(w, "  segment %s (%s:%s) on %s: %s, clock offset %+.1fms%s%s\n", s.Label(), s.From, s.To, s.Host, s.Status, s.ClockOffsetMs, cpu, inc)
	}
	for _, n := range m.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if m.Partial {
		fmt.Fprintf(w, "PARTIAL (--allow-partial): this document does not hold the whole run\n")
	}
	fmt.Fprintf(w, "%d operations (%d errors), %.1f per s, integral APDEX %s\n", d.Totals.Count, d.Totals.Errors, d.Totals.PerSecond, fmtIntegral(d))
	fmt.Fprintf(w, "results: %s (merged in %s)\n", out, took.Round(time.Millisecond))
}
