package capacity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
	"github.com/erplab/erplab/internal/safefile"
)

// Format and SchemaVersion name the capacity document
// (docs/results-format.md, "The capacity document").
const (
	Format        = "erplab-capacity"
	SchemaVersion = 1
)

// Document is the file `erplab capacity` writes: the search, every step
// with its own results document, and the capacity found. It is rewritten
// atomically after every step, so a killed search keeps its finished
// steps.
type Document struct {
	Format      string    `json:"format"`
	Schema      int       `json:"schema"`
	Version     string    `json:"erplab_version"`
	CommandLine []string  `json:"command_line"`
	Workload    string    `json:"workload"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	// Status is "running" while the search goes on, then "completed",
	// "interrupted" or "failed: <why>"; Writer is the writing process (a
	// "running" document whose process is gone was killed: StatusText).
	Status string `json:"status"`
	Writer
	// Model is "closed" (the load is users: VUs with think time) or
	// "open" (arrivals per second); Unit names the load ("users",
	// "arrivals/s").
	Model  string     `json:"model"`
	Unit   string     `json:"unit"`
	Target TargetJSON `json:"target"`
	Search SearchJSON `json:"search"`
	Steps  []Step     `json:"steps"`
	// Result is the capacity known when the document was written.
	Result Result `json:"result"`
}

// StatusText is Status as a reader should see it (Writer.Describe):
// "incomplete (the writing process, pid N, is gone)" for a killed
// search.
func (d *Document) StatusText() string { return d.Writer.Describe(d.Status) }

// Writer is the process that writes a document rewritten as it goes
// (the capacity document, the A/B document): its PID and host name.
// Both are absent in documents written before they were recorded.
type Writer struct {
	PID  int    `json:"pid,omitempty"`
	Host string `json:"host,omitempty"`
}

// thisWriter is the calling process on this host.
func thisWriter() Writer {
	host, _ := os.Hostname()
	return Writer{PID: os.Getpid(), Host: host}
}

// Describe is a document's status as a reader should see it: any status
// but "running" as it is; a "running" one is "running (pid N)" while its
// writer (PID on this Host) exists, "incomplete (the writing process,
// pid N, is gone)" once it does not (it was killed: kill -9, OOM, power
// cut), and "running or killed (pid N on host H)" or "running or killed
// (no writing process recorded)" when this host cannot tell.
func (w Writer) Describe(status string) string {
	if status != "running" {
		return status
	}
	host, _ := os.Hostname()
	switch {
	case w.PID <= 0:
		return "running or killed (no writing process recorded)"
	case w.Host != host:
		return fmt.Sprintf("running or killed (pid %d on host %s)", w.PID, w.Host)
	case !processAlive(w.PID):
		return fmt.Sprintf("incomplete (the writing process, pid %d, is gone)", w.PID)
	}
	return fmt.Sprintf("running (pid %d)", w.PID)
}

// processAlive reports whether process pid exists on this host (signal
// 0: EPERM means it exists under another user).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// TargetJSON is the Target as recorded.
type TargetJSON struct {
	Apdex        float64            `json:"apdex"`
	ErrorRatePct float64            `json:"error_rate_pct"`
	P95Ms        map[string]float64 `json:"p95_ms,omitempty"`
}

// SearchJSON is the Plan and the step shape as recorded.
type SearchJSON struct {
	Start         float64 `json:"start"`
	Max           float64 `json:"max"`
	Step          string  `json:"step"`
	ResolutionPct float64 `json:"resolution_pct"`
	HoldS         float64 `json:"hold_s"`
	RampS         float64 `json:"ramp_s"`
	WarmupS       float64 `json:"warmup_s"`
	Think         string  `json:"think_time,omitempty"`
	// UserOpsPerHour is --user-ops-per-hour (0 when not given).
	UserOpsPerHour float64 `json:"user_ops_per_hour,omitempty"`
	// Connections is the pool rule: -1 min(users, 100), 0 one per VU, N.
	Connections int `json:"connections"`
	Workers     int `json:"workers,omitempty"`
}

// Score is an APDEX (or other figure) with its confidence interval; Lo
// and Hi absent when there is none.
type Score struct {
	Value float64  `json:"value"`
	Lo    *float64 `json:"lo,omitempty"`
	Hi    *float64 `json:"hi,omitempty"`
}

func scoreOf(i compare.Interval) Score {
	s := Score{Value: i.Value}
	if math.IsNaN(i.Value) {
		s.Value = 0
	}
	if !math.IsNaN(i.Lo) && !math.IsNaN(i.Hi) {
		s.Lo, s.Hi = ptr(i.Lo), ptr(i.Hi)
	}
	return s
}

// String prints "0.86 [0.83-0.88]" (APDEX's two decimals).
func (s Score) String() string {
	v := fmtApdex(s.Value)
	if s.Lo != nil && s.Hi != nil {
		v += fmt.Sprintf(" [%s-%s]", fmtApdex(*s.Lo), fmtApdex(*s.Hi))
	}
	return v
}

// Step is one judged step of the search.
type Step struct {
	// Index counts from 1; Load is the users (arrivals/s); Attempt
	// counts the runs at this load (2 for a repeated boundary step).
	Index   int     `json:"index"`
	Load    float64 `json:"load"`
	Attempt int     `json:"attempt"`
	// Outcome and Reasons are the Judgement; Straddles says the
	// interval held the target.
	Outcome   Outcome  `json:"outcome"`
	Reasons   []string `json:"reasons,omitempty"`
	Straddles bool     `json:"straddles,omitempty"`
	Apdex     Score    `json:"apdex"`
	// OpApdex and P95Ms are per operation.
	OpApdex map[string]Score `json:"op_apdex,omitempty"`
	P95Ms   map[string]Score `json:"p95_ms,omitempty"`
	// Throughput is key operations per second; ErrorPct failed ones.
	Throughput float64 `json:"throughput_per_s"`
	ErrorPct   float64 `json:"error_pct"`
	// GeneratorCPU is erplab's own CPU, cores (absent when unknown).
	GeneratorCPU *float64  `json:"generator_cpu_cores,omitempty"`
	Resources    Resources `json:"resources"`
	// Path is the step's own results file; Run its document.
	Path string            `json:"results_path,omitempty"`
	Run  *results.Document `json:"run,omitempty"`
}

// Result is the capacity and why the search stopped.
type Result struct {
	// Capacity is the highest good load (0: none); Apdex its score.
	Capacity float64 `json:"capacity"`
	Apdex    *Score  `json:"apdex,omitempty"`
	// FirstBad is the lowest bad load (0: none); FirstBadApdex its score.
	FirstBad      float64 `json:"first_bad,omitempty"`
	FirstBadApdex *Score  `json:"first_bad_apdex,omitempty"`
	Stop          Stop    `json:"stop"`
	// Reasons are the first bad step's missed criteria; Limit the
	// limiting-resource verdict (Limiting); Line the verdict line.
	Reasons []string `json:"reasons,omitempty"`
	Limit   string   `json:"limit,omitempty"`
	Line    string   `json:"line"`
}

// NewStep builds the step record from a judged run.
func NewStep(index int, load float64, attempt int, d *results.Document, path string, est *compare.Estimates, res Resources, j Judgement) Step {
	st := Step{
		Index: index, Load: load, Attempt: attempt, Outcome: j.Outcome, Reasons: j.Reasons, Straddles: j.Straddles,
		Apdex: scoreOf(j.Apdex), Throughput: d.Totals.PerSecond, Resources: res, Path: path, Run: d,
	}
	if d.Totals.Count > 0 {
		st.ErrorPct = 100 * float64(d.Totals.Errors) / float64(d.Totals.Count)
	}
	if !math.IsNaN(j.GeneratorCPU) {
		st.GeneratorCPU = ptr(j.GeneratorCPU)
	}
	if est != nil {
		st.OpApdex, st.P95Ms = map[string]Score{}, map[string]Score{}
		for op, iv := range est.Apdex {
			if !math.IsNaN(iv.Value) {
				st.OpApdex[op] = scoreOf(iv)
			}
		}
		for op, iv := range est.P95 {
			if !math.IsNaN(iv.Value) {
				st.P95Ms[op] = scoreOf(iv)
			}
		}
	}
	return st
}

// Conclude fills d.Result from the steps and the search's state:
// the capacity (last good load), the first bad load, the stop, the
// limiting resource and the verdict line, e.g. "capacity 46 users at
// APDEX 0.86 [0.83-0.88]; at 64 users APDEX 0.74; limited by
// LWLock:LockManager (38 % of active time), server CPU 97 %".
func (d *Document) Conclude(lastGood, firstBad float64, stop Stop) {
	r := Result{Capacity: lastGood, FirstBad: firstBad, Stop: stop}
	good, bad := d.latest(lastGood, OutcomeGood), d.latest(firstBad, OutcomeBad)
	var line strings.Builder
	switch {
	case good != nil:
		a, text := d.decidingApdex(lastGood)
		r.Apdex = &a
		fmt.Fprintf(&line, "capacity %s at APDEX %s", LoadText(lastGood, d.Unit), text)
	case bad != nil:
		fmt.Fprintf(&line, "capacity below %s", LoadText(firstBad, d.Unit))
	default:
		line.WriteString("capacity not known")
	}
	if bad != nil {
		a, _ := d.decidingApdex(firstBad)
		r.FirstBadApdex, r.Reasons = &a, d.decidingReasons(firstBad, bad)
		fmt.Fprintf(&line, "; at %s %s", LoadText(firstBad, d.Unit), strings.Join(r.Reasons, ", "))
		r.Limit = Limiting(good, *bad, d.Unit)
		if good == nil && p95Only(bad.Reasons) {
			// missed at the lowest load tried: the --p95 target, not a
			// saturated resource, is what no load meets
			r.Limit = "limited by the --p95 target (missed even at " + LoadText(firstBad, d.Unit) + "); resources there: " + strings.TrimPrefix(r.Limit, "limited by ")
		}
		line.WriteString("; " + r.Limit)
	}
	switch stop.Kind {
	case StopMaxReached:
		fmt.Fprintf(&line, "; at least that: the maximum %s was good", LoadText(d.Search.Max, d.Unit))
	case StopGenerator, StopServer, StopDiskFull:
		line.WriteString("; search ended: " + stop.Detail)
	case StopCancelled:
		line.WriteString("; search interrupted")
	}
	r.Line = line.String()
	d.Result = r
}

// decidingApdex is the integral APDEX that decided load: its step's
// score, or with repeated attempts their mean (what the search decides
// a repeated step by; no interval), with the text "0.86 (mean of 2
// attempts: 0.84 [0.81-0.87], 0.88 [0.85-0.90])".
func (d *Document) decidingApdex(load float64) (Score, string) {
	var as []Score
	for _, s := range d.attempts(load) {
		as = append(as, s.Apdex)
	}
	switch len(as) {
	case 0:
		return Score{}, "not known"
	case 1:
		return as[0], as[0].String()
	}
	sum := 0.0
	var each []string
	for _, a := range as {
		sum += a.Value
		each = append(each, a.String())
	}
	m := Score{Value: sum / float64(len(as))}
	return m, fmt.Sprintf("%s (mean of %d attempts: %s)", m, len(as), strings.Join(each, ", "))
}

// attempts are the judged (good or bad) steps at load, in run order.
func (d *Document) attempts(load float64) []Step {
	var out []Step
	for _, s := range d.Steps {
		if s.Load == load && (s.Outcome == OutcomeGood || s.Outcome == OutcomeBad) {
			out = append(out, s)
		}
	}
	return out
}

// decidingReasons are the criteria that made load bad, as the search
// decided it: bad's own reasons for a step run once or an attempt with
// a reason that is not an interval criterion (errors, refused
// connections, no samples: never pooled); for a repeated step otherwise
// the means of its attempts against the target, e.g. "APDEX 0.82 (mean
// of 2 attempts: 0.84 [0.82-0.86], 0.80 [0.78-0.82]) < 0.85", "p95 post
// 540ms (mean of 2 attempts: 480ms, 600ms) > 500ms".
func (d *Document) decidingReasons(load float64, bad *Step) []string {
	as := d.attempts(load)
	if len(as) < 2 {
		return bad.Reasons
	}
	for _, a := range as {
		for _, r := range a.Reasons {
			if !strings.HasPrefix(r, "p95 ") && (!strings.HasPrefix(r, "APDEX ") || strings.HasPrefix(r, "APDEX NS")) {
				return a.Reasons
			}
		}
	}
	var out []string
	if m, text := d.decidingApdex(load); m.Value < d.Target.Apdex {
		out = append(out, fmt.Sprintf("APDEX %s < %s", text, fmtApdex(d.Target.Apdex)))
	}
	for _, op := range sortedOps(d.Target.P95Ms) {
		var sum float64
		var each []string
		for _, a := range as {
			if p, ok := a.P95Ms[op]; ok {
				sum += p.Value
				each = append(each, results.FormatMs(p.Value))
			}
		}
		limit := d.Target.P95Ms[op]
		if len(each) == 0 || sum/float64(len(each)) <= limit {
			continue
		}
		out = append(out, fmt.Sprintf("p95 %s %s (mean of %d attempts: %s) > %s", op, results.FormatMs(sum/float64(len(each))),
			len(each), strings.Join(each, ", "), time.Duration(limit*float64(time.Millisecond))))
	}
	if len(out) == 0 {
		return bad.Reasons
	}
	return out
}

// sortedOps are the keys of m, sorted.
func sortedOps(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for op := range m {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}

// p95Only reports whether every reason is a missed --p95 limit.
func p95Only(reasons []string) bool {
	for _, r := range reasons {
		if !strings.HasPrefix(r, "p95 ") {
			return false
		}
	}
	return len(reasons) > 0
}

// LoadText is a load with its unit, singular for one user: "1 user",
// "46 users", "2.5 arrivals/s".
func LoadText(v float64, unit string) string {
	if v == 1 && unit == "users" {
		return "1 user"
	}
	return fmtLoad(v) + " " + unit
}

// CapacityText is the capacity as the verdict line states it: "46
// users", "below 1 user" (no load was good), "not known".
func (r Result) CapacityText(unit string) string {
	switch {
	case r.Capacity > 0:
		return LoadText(r.Capacity, unit)
	case r.FirstBad > 0:
		return "below " + LoadText(r.FirstBad, unit)
	}
	return "not known"
}

// latest is the last step at load with the outcome, nil when none.
func (d *Document) latest(load float64, o Outcome) *Step {
	if load == 0 {
		return nil
	}
	for i := len(d.Steps) - 1; i >= 0; i-- {
		if s := &d.Steps[i]; s.Load == load && s.Outcome == o {
			return s
		}
	}
	// A repeated step pooled to the other side: its last attempt.
	for i := len(d.Steps) - 1; i >= 0; i-- {
		if s := &d.Steps[i]; s.Load == load {
			return s
		}
	}
	return nil
}

// Write writes the document atomically to path (results.WriteJSON).
func (d *Document) Write(path string, perm fs.FileMode) error {
	return results.ReplaceJSON(path, d, perm)
}

// WriteIn is Write for the file name in the directory dir, held open.
func (d *Document) WriteIn(dir *safefile.Root, name string, perm fs.FileMode) error {
	return results.ReplaceJSONIn(dir, name, d, perm)
}

// Read reads a capacity document. Errors: the file cannot be read, is
// not JSON, or is not a capacity document of a schema this erplab reads.
func Read(path string) (*Document, error) {
	var d Document
	if err := readDocument(path, "capacity", Format, SchemaVersion, &d, func() (string, int) { return d.Format, d.Schema }); err != nil {
		return nil, err
	}
	for i, s := range d.Steps {
		if s.Run != nil {
			if err := results.Validate(s.Run); err != nil {
				return nil, fmt.Errorf("capacity: %s: step %d: %w", path, i+1, err)
			}
		}
	}
	return &d, nil
}

// readDocument reads the JSON file at path into v and checks its format
// and schema (got returns them from v): format want, schema 1 to max.
// Errors are prefixed with what.
func readDocument(path, what, want string, max int, v any, got func() (string, int)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %s: %w", what, path, err)
	}
	format, schema := got()
	if format != want {
		return fmt.Errorf("%s: %s: format %q is not %q", what, path, format, want)
	}
	if schema < 1 || schema > max {
		return fmt.Errorf("%s: %s: schema %d not supported (this erplab reads 1 to %d)", what, path, schema, max)
	}
	return nil
}

// IsDocument reports whether the file at path looks like a capacity
// document (its "format" field), reading only its start.
func IsDocument(path string) bool { return hasFormat(path, Format) }

// hasFormat reports whether the JSON file at path has "format": format
// within its first 512 bytes.
func hasFormat(path, format string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, 512)
	n, _ := f.Read(buf)
	return bytes.Contains(buf[:n], []byte(`"format": "`+format+`"`)) || bytes.Contains(buf[:n], []byte(`"format":"`+format+`"`))
}

// ErrBelowRequired is wrapped when the capacity is below --require.
var ErrBelowRequired = errors.New("capacity below the requirement")

func fmtLoad(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
