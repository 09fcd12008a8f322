package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/loadtest"
)

// segmentFlags are erplab run's options of a run split over several load
// machines (docs/architecture.md, "Segments").
type segmentFlags struct {
	segment, execSegment, execSequence string
	runID, startAt                     string
	maxClockOffset                     time.Duration
}

func addSegmentFlags(fl *pflag.FlagSet, f *segmentFlags) {
	fl.StringVar(&f.segment, "segment", "", "run piece I of N of a run split over N load machines (I/N, 1-based; auto/N takes I = $JOB_COMPLETION_INDEX + 1); needs --run-id and --dsn")
	fl.StringVar(&f.execSegment, "execution-segment", "", "k6's form of --segment: the piece a:b (rationals, e.g. 1/3:2/3) of --execution-segment-sequence")
	fl.StringVar(&f.execSequence, "execution-segment-sequence", "", "the points of the whole segment sequence, e.g. 0,1/3,2/3,1 (default 0,a,b,1)")
	fl.StringVar(&f.runID, "run-id", "", "the run's id, the same for every agent of a segmented run (default: a fresh random id; required with --segment)")
	fl.StringVar(&f.startAt, "start-at", "", "start the load at this time (RFC 3339, e.g. 2026-12-01T16:00:00Z): the agents' start barrier")
	fl.DurationVar(&f.maxClockOffset, "max-clock-offset", loadtest.DefaultMaxClockOffset, "segmented run: refuse when this host's clock is further than this from the server's")
}

// apply parses the segment options into opts; errors are usage errors.
func (f *segmentFlags) apply(cmd *cobra.Command, opts *loadtest.Options) error {
	fl := cmd.Flags()
	var (
		seg *engine.Segment
		err error
	)
	switch {
	case f.segment != "" && f.execSegment != "":
		return errors.New("--segment and --execution-segment are two forms of one option: give one")
	case f.segment != "":
		if seg, err = engine.ParseSegment(f.segment, os.Getenv); err != nil {
			return err
		}
	case f.execSegment != "":
		if seg, err = engine.ParseExecutionSegment(f.execSegment, f.execSequence); err != nil {
			return err
		}
	case f.execSequence != "":
		return errors.New("--execution-segment-sequence goes with --execution-segment")
	}
	if f.runID != "" {
		if err := loadtest.ValidRunID(f.runID); err != nil {
			return err
		}
	}
	if !seg.Whole() {
		if f.runID == "" {
			return errors.New("--segment needs --run-id: give every agent of the run the same one")
		}
		if opts.Keep || opts.OSUser != "" || (opts.DSN == "" && !opts.EnvGiven) {
			return errors.New("--segment needs the server all agents share: give --dsn (or the PG* environment), not the throwaway server")
		}
		opts.Segment = seg
	}
	if f.startAt != "" {
		t, err := time.Parse(time.RFC3339Nano, f.startAt)
		if err != nil {
			return fmt.Errorf("--start-at %q: want an RFC 3339 time such as 2026-12-01T16:00:00Z", f.startAt)
		}
		opts.StartAt = t
	}
	if fl.Changed("max-clock-offset") && f.maxClockOffset <= 0 {
		return fmt.Errorf("--max-clock-offset must be > 0, got %s", f.maxClockOffset)
	}
	opts.RunID, opts.MaxClockOffset = f.runID, f.maxClockOffset
	return nil
}
