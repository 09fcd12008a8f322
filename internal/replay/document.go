package replay

import (
	"context"
	"encoding/json"
	"runtime"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/runenv"
)

// Workload is the results document's workload name for a replay.
const Workload = "replay"

// environment is the results' environment, in the shape `erplab run`
// writes (host, server, embedded).
type environment struct {
	Host     runenv.Host   `json:"host"`
	Server   runenv.Server `json:"server"`
	Embedded bool          `json:"embedded"`
}

// readEnvironment reads the load machine and the target server; what it
// cannot read stays empty (the replay does not depend on it).
func readEnvironment(ctx context.Context, conn *pgx.Conn) environment {
	var env environment
	if h, err := runenv.ReadHost(hostfacts.DefaultProcRoot, hostfacts.DefaultSysRoot); err == nil {
		env.Host = h
	}
	if env.Host.CPUs == 0 {
		env.Host.CPUs = runtime.NumCPU()
	}
	if s, err := runenv.ReadServer(ctx, conn); err == nil {
		env.Server = s
	}
	return env
}

// parameters is what the results document keeps of the options; the
// operations in the shape every erplab document has (results.Rebuild reads
// them from a stream's header).
type parameters struct {
	Workload   string      `json:"workload"`
	Source     string      `json:"source,omitempty"`
	Speed      float64     `json:"speed"`
	UsersX     int         `json:"users_x"`
	OffsetMs   float64     `json:"offset_ms"`
	Order      Order       `json:"order"`
	Sessions   int         `json:"sessions"`
	WarmupS    float64     `json:"warmup_s"`
	IntervalS  float64     `json:"interval_s"`
	Server     string      `json:"server"` // the DSN, redacted
	Operations []operation `json:"operations"`
}

type operation struct {
	Name        string  `json:"name"`
	TargetMs    float64 `json:"target_ms"`
	Priority    int     `json:"priority"`
	Description string  `json:"description"`
}

// document builds the results document from the recorder, as `erplab run`
// does, with the fidelity in extra.replay.
func (r *replay) document(env environment, end time.Time, status results.Status) (*results.Document, Fidelity) {
	o := r.opts
	params := parameters{
		Workload: Workload, Source: string(o.Header.Source), Speed: o.Speed, UsersX: o.UsersX,
		OffsetMs: ms(r.offset), Order: o.Order, Sessions: len(r.plan.sessions),
		IntervalS: o.Interval.Seconds(), Server: conninfo.Redact(o.DSN),
	}
	for _, g := range r.plan.groups {
		params.Operations = append(params.Operations, operation{g.name, ms(g.target), 1, "by " + g.by + ", T from " + g.targetBy})
	}
	doc := &results.Document{
		Format: results.Format, Schema: results.SchemaVersion, Version: o.Version,
		CommandLine: conninfo.RedactArgs(o.CommandLine), Workload: Workload, Status: status,
		StartedAt: r.start, EndedAt: end, RunID: o.RunID,
	}
	doc.Environment, _ = json.Marshal(env)
	doc.Parameters, _ = json.Marshal(params)
	scored := end.Sub(r.start)
	doc.Operations = r.rec.Results(scored)
	v, ok := results.Integral(doc.Operations)
	doc.Integral = results.NewIntegralScore(v, ok)
	doc.Totals = r.rec.Totals(scored)
	doc.Series = r.rec.Series()
	fid := r.fidelity(doc.Operations)
	raw, _ := json.Marshal(fid)
	doc.Extra = map[string]json.RawMessage{"replay": raw}
	return doc, fid
}

// fidelity completes the tally with the run's settings and each group's
// captured and replayed durations.
func (r *replay) fidelity(ops []results.OpResult) Fidelity {
	f := r.tally.fidelity()
	f.Source, f.Partial = r.opts.Header.Source, r.opts.Header.Partial
	f.Order, f.Speed, f.UsersX, f.OffsetMs = r.opts.Order, r.opts.Speed, r.opts.UsersX, ms(r.offset)
	f.Sessions = len(r.plan.sessions)
	for i, g := range r.plan.groups {
		gf := GroupFigures{Name: g.name, By: g.by, TargetMs: ms(g.target), TargetBy: g.targetBy, Captured: durations(g.captured)}
		if i < len(ops) {
			gf.Replayed = Durations{Count: ops[i].Count - ops[i].Errors, P50: ops[i].Response.P50, P95: ops[i].Response.P95}
		}
		f.Groups = append(f.Groups, gf)
	}
	return f
}

// durations summarise a histogram of µs.
func durations(h *hdrhistogram.Histogram) Durations {
	l := results.Summarize(h)
	return Durations{Count: h.TotalCount(), P50: l.P50, P95: l.P95}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
