package loadtest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/engine"
	"github.com/erplab/erplab/internal/opmap"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/workload"
)

// checkDriven refuses the options a workload that drives its own load
// (workload.Driver: a replay) cannot honour, in one line.
func checkDriven(opts Options) error {
	name := opts.Workload.Name()
	switch {
	case !opts.Segment.Whole():
		return fmt.Errorf("--workload %s drives its own load: a run split over agents (--segment) does not apply", name)
	case opts.Profile:
		return fmt.Errorf("--workload %s drives its own load: --profile does not apply (yet)", name)
	case opts.Stress != nil:
		return fmt.Errorf("--workload %s drives its own load: --stress does not apply (yet)", name)
	case opts.MetricsAddr != "":
		return fmt.Errorf("--workload %s drives its own load: --metrics-addr does not apply (yet)", name)
	case len(opts.Rate) > 0 || opts.TxPerVU > 0:
		return fmt.Errorf("--workload %s drives its own load: an arrival rate or transactions per VU do not apply", name)
	}
	return nil
}

// drive is the rest of Run for a workload that drives its own load: the
// data is set up and the run's connections are closed (the driver may
// copy the database, which needs it without sessions); Drive runs the
// load, its intervals go to the results stream, the samplers observe the
// database it runs in (with Observe, extra.observations), and its
// document is written as the run's results.
func drive(ctx context.Context, opts Options, d workload.Driver, dsn string, streamFile *os.File, loc resultsLoc, perm fs.FileMode, out io.Writer) (*Result, error) {
	stream := results.DiscardStream()
	if streamFile != nil {
		stream = results.NewStreamNamed(streamFile, loc.dir.Join(loc.streamName()))
	}
	defer stream.Close()
	head := &results.Document{Format: results.Format, Schema: results.SchemaVersion, Version: opts.Version,
		CommandLine: conninfo.RedactArgs(opts.CommandLine), Workload: opts.Workload.Name(), Status: results.StatusRunning, RunID: opts.RunID}
	if err := stream.Write(results.StreamLine{Type: "header", Header: head}); err != nil {
		return nil, err
	}
	var obs *sampler.Session
	observe := func(dsn string, start time.Time, ops *opmap.Map) func() {
		so := sampler.SessionOptions{Interval: cmp.Or(opts.ObserveInterval, opts.Interval)}
		so.Ops = ops
		s, err := sampler.Start(context.WithoutCancel(ctx), dsn, start, so)
		if err != nil {
			fmt.Fprintf(out, "warning: observations off: %v\n", err)
			return func() {}
		}
		obs = s
		return s.Stop
	}
	if !opts.Observe {
		observe = nil
	}
	doc, err := d.Drive(ctx, workload.DriveOptions{
		DSN: dsn, Users: engine.MaxTarget(opts.Stages), Interval: opts.Interval, Observe: observe,
		OnInterval: func(iv results.Interval) {
			if stream.Err() == nil {
				_ = stream.Write(results.StreamLine{Type: "interval", Interval: &iv})
			}
		},
		Version: opts.Version, CommandLine: opts.CommandLine, RunID: opts.RunID, Out: out,
	})
	if err != nil {
		stream.Close()
		if streamFile != nil {
			loc.dir.Remove(loc.streamName()) // nothing ran: no attempt to report
		}
		if ctx.Err() != nil {
			return nil, ErrInterrupted
		}
		return nil, err
	}
	if obs != nil {
		if doc.Extra == nil {
			doc.Extra = map[string]json.RawMessage{}
		}
		doc.Extra["observations"] = obs.Observations()
		fmt.Fprintln(out)
		PrintObservations(out, doc)
	}
	if streamFile == nil {
		return &Result{Doc: doc}, nil
	}
	res := &Result{Doc: doc, Path: loc.path(), StreamPath: stream.Path()}
	fmt.Fprintln(out)
	if err := writeResults(out, doc, stream, loc, opts.ReplaceOut && opts.Out != "", perm); err != nil {
		res.Path = ""
		return res, err
	}
	return res, nil
}
