// Package top is `erplab top`: a live terminal view of a PostgreSQL server
// laid out like the field script of the 30,000-user load test (docs
// docs/field-notes.md section 1): sessions by state, active sessions by wait event
// with a small trend, a header with tps, the host CPU split, temp files
// and catalog growth, and the longest-running active queries. Run drives
// the interactive view (bubbletea); Print writes plain-text snapshots.
//
// The sessions and blocking views (sessions.go, sessions_view.go) read
// pg_stat_activity of every database on a second session (Options.Conn
// or Dial): one row per client backend, its parallel workers (by
// leader_pid) folded in with their wait events; pg_blocking_pids only for
// backends waiting on a heavyweight lock, so the lock manager is not read
// for the others. Blocking builds the forest of root blockers and chains;
// FullQuery and Kill (pg_cancel_backend, pg_terminate_backend) act on the
// selected session after a confirmation key.
package top

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mattn/go-runewidth"

	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

// Section titles, also what scripts and tests look for.
const (
	TitleSessions = "SESSIONS BY STATE"
	TitleWaits    = "ACTIVE SESSIONS BY WAIT EVENT"
	TitleQueries  = "LONGEST-RUNNING ACTIVE QUERIES"
)

// trendLen is how many samples the trend column shows.
const trendLen = 20

// SortMode orders the wait-event and query tables.
type SortMode int

const (
	// SortCount orders wait events by count, queries by duration (the
	// default).
	SortCount SortMode = iota
	// SortName orders wait events by name, queries by wait event then
	// duration.
	SortName
)

func (m SortMode) String() string {
	if m == SortName {
		return "name"
	}
	return "count"
}

// state is what the view shows: the latest sample and some history.
type state struct {
	info    sampler.Info
	last    *sampler.Sample
	n       int                  // samples taken
	trends  map[string][]float64 // wait key -> figures (waitValues) of the last trendLen samples, oldest first
	det     *storm.Detector
	storm   *storm.Event // the latest storm, ongoing or ended
	start   time.Time
	onStorm func(storm.Event)
	// others is the latest reading of other databases' catalogs
	// (sampler.Options.Catalogs), othersAt when it was taken.
	others   []sampler.DatabaseCatalog
	othersAt time.Time
	// inval is the latest Options.Invalidation line ("" none).
	inval string
}

func newState(info sampler.Info, rule storm.Rule, cpus int, onStorm func(storm.Event)) (*state, error) {
	if rule == (storm.Rule{}) {
		rule = storm.DefaultRule()
	}
	if rule.CPUs == 0 {
		rule.CPUs = cpus // the crowd rule, on for a local server as in run
	}
	det, err := storm.NewDetector(rule)
	if err != nil {
		return nil, err
	}
	return &state{info: info, trends: map[string][]float64{}, det: det, start: time.Now(), onStorm: onStorm}, nil
}

// add records a sample: trends shift by one for every key seen so far,
// and the storm detector sees it.
func (st *state) add(s *sampler.Sample) {
	if s.OtherCatalogs != nil {
		st.others, st.othersAt = s.OtherCatalogs, s.Time
	}
	st.push(s)
	st.detect(s)
}

// push makes s the sample shown and shifts the trends.
func (st *state) push(s *sampler.Sample) {
	st.n++
	st.last = s
	vals := waitValues(s)
	for k := range vals {
		if _, ok := st.trends[k]; !ok {
			st.trends[k] = make([]float64, min(st.n-1, trendLen))
		}
	}
	for k, h := range st.trends {
		h = append(h, vals[k])
		if len(h) > trendLen {
			h = h[len(h)-trendLen:]
		}
		st.trends[k] = h
		if vals[k] == 0 && allZero(h) {
			delete(st.trends, k)
		}
	}
}

// detect runs the storm detector on s.
func (st *state) detect(s *sampler.Sample) {
	p := s.StormPoint(s.Time.Sub(st.start).Seconds())
	fired, ended := st.det.Observe(p)
	for _, e := range []*storm.Event{ended, fired} {
		if e == nil {
			continue
		}
		st.storm = e
		if st.onStorm != nil {
			st.onStorm(*e)
		}
	}
}

// waitValues are the figures of the wait-event table: with
// pg_wait_sampling's profile (s.WaitProfile), the mean number of sessions
// in each wait over the interval, sampled every profile_period ms in the
// server, plus "CPU" (active and not waiting) from pg_stat_activity when
// the profile has no such key (pg_wait_sampling 1.1.4 samples only waiting
// processes); without it, pg_stat_activity's active sessions by wait
// event at the sample's instant.
func waitValues(s *sampler.Sample) map[string]float64 {
	out := make(map[string]float64, len(s.Waits)+len(s.WaitProfile))
	if s.WaitProfile == nil {
		for k, n := range s.Waits {
			out[k] = float64(n)
		}
		return out
	}
	for k, v := range s.WaitProfile {
		out[k] = v
	}
	if _, ok := out["CPU"]; !ok && s.Waits["CPU"] > 0 {
		out["CPU"] = float64(s.Waits["CPU"])
	}
	return out
}

func allZero(h []float64) bool {
	for _, v := range h {
		if v != 0 {
			return false
		}
	}
	return true
}

// viewOpts are the display settings.
type viewOpts struct {
	width, height int // height 0 = unlimited
	interval      time.Duration
	sort          SortMode
	paused        bool
	footer        string
	errLine       string
	// replay is where a played recording stands ("replay +41m05s,
	// sample 2466/3600"), "" live.
	replay string
	// noQueries replaces "(none)" under the query table's head when the
	// queries were not kept (a run's results).
	noQueries string
}

// render draws the whole screen as plain text lines of at most width
// display cells.
func render(st *state, o viewOpts) string {
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	s := st.last

	status := fmt.Sprintf("every %s, sort: %s", o.interval, o.sort)
	if o.replay != "" {
		status += ", " + o.replay
	}
	if o.paused {
		status += ", PAUSED"
	}
	when := ""
	if s != nil {
		when = s.Time.Format("15:04:05")
	}
	where := "remote"
	if st.info.Local {
		where = "local"
	}
	add("erplab top - PostgreSQL %s, database %s (%s) - %s - %s", shortVersion(st.info.Version), st.info.Database, where, when, status)
	if !st.info.StatsPrivileged {
		role := st.info.Role
		if role == "" {
			role = "<role>"
		}
		add("note: role %s lacks pg_read_all_stats (GRANT pg_monitor TO %s): other users' sessions count as \"other\", their waits and queries are hidden", role, role)
	}
	if o.errLine != "" {
		add("error: %s", o.errLine)
	}
	if s == nil {
		add("waiting for the first sample...")
		return fit(lines, o)
	}
	if d := s.DB; d != nil {
		hit := "n/a"
		if d.BlksHit+d.BlksRead > 0 {
			hit = fmt.Sprintf("%.1f %%", 100*d.BlksHit/(d.BlksHit+d.BlksRead))
		}
		add("tps %.1f (commit %.1f rollback %.1f)  temp files %.1f/s %s/s  deadlocks %.1f/s  hit %s",
			d.TPS, d.Commits, d.Rollbacks, d.TempFiles, bytesHuman(d.TempBytes), d.Deadlocks, hit)
	} else {
		add("tps -  (rates from the second sample on)")
	}
	if c := s.Churn; c != nil {
		add("temp-relation churn: %s", sampler.ChurnText(c))
	}
	if st.inval != "" {
		add("%s", st.inval)
	}
	if h := s.Host; h != nil {
		c := h.CPU
		if h.Rates {
			add("CPU %.0f %% busy: user %.1f system %.1f iowait %.1f nice %.1f irq %.1f softirq %.1f steal %.1f",
				c.Busy, c.User, c.System, c.Iowait, c.Nice, c.IRQ, c.SoftIRQ, c.Steal)
		} else {
			add("CPU -  (from the second sample on)")
		}
		add("memory available %s of %s, dirty %s; tasks running %d, blocked on I/O %d",
			bytesHuman(float64(h.Mem.Available)), bytesHuman(float64(h.Mem.Total)), bytesHuman(float64(h.Mem.Dirty)),
			h.ProcsRunning, h.ProcsBlocked)
		add("THP %s in use, faults %.1f/s, fallbacks %.1f/s, collapses %.1f/s; compaction stalls %.1f/s",
			bytesHuman(float64(h.Mem.AnonHugePages)), h.VM.THPFaultAlloc, h.VM.THPFaultFallback, h.VM.THPCollapseAlloc, h.VM.CompactStall)
	} else if s.HostError != "" {
		add("host: %s", s.HostError)
	} else {
		add("CPU n/a (the server is not on this machine)")
	}
	if len(s.Catalog) > 0 {
		sizes := make([]string, 0, len(s.Catalog))
		rates := make([]string, 0, len(s.Catalog))
		for _, r := range s.Catalog {
			name := strings.TrimPrefix(r.Name, "pg_")
			sizes = append(sizes, fmt.Sprintf("%s %s", name, bytesHuman(float64(r.Bytes))))
			rates = append(rates, fmt.Sprintf("%s +%.0f/-%.0f", name, r.InsPerS, r.DelPerS))
		}
		add("catalog %s (%s/s): %s", bytesHuman(float64(s.CatalogBytes())), signedBytes(s.CatalogGrowth()), strings.Join(sizes, ", "))
		add("catalog rows/s inserted/deleted: %s", strings.Join(rates, ", "))
	}
	lines = append(lines, otherCatalogLines(st.others, st.othersAt)...)
	if e := st.storm; e != nil {
		at := st.start.Add(time.Duration(e.T * float64(time.Second))).Format("15:04:05")
		if e.Ongoing() {
			add("STORM %s (since %s, peak %d)", e.Message, at, e.Peak)
		} else {
			end := st.start.Add(time.Duration(*e.EndT * float64(time.Second))).Format("15:04:05")
			add("last storm: %s (%s-%s, peak %d)", e.Message, at, end, e.Peak)
		}
	}
	add("")

	// Sessions by state.
	ss := s.Sessions
	add("%-31s %7s", TitleSessions, "COUNT")
	for _, r := range []struct {
		name string
		n    int
	}{{"active", ss.Active}, {"idle", ss.Idle}, {"idle in transaction", ss.IdleInTransaction},
		{"idle in transaction (aborted)", ss.IdleInTransactionAborted}, {"other", ss.Other},
		{"total", ss.Total()}, {"parallel workers (folded)", s.ParallelWorkers}} {
		add("%-31s %7d", r.name, r.n)
	}
	add("")

	// Active sessions by wait event.
	if s.WaitProfile != nil {
		add("waits: pg_wait_sampling every %g ms in the server, mean sessions over %.1f s; CPU from pg_stat_activity (instant)",
			st.info.WaitSamplingPeriodMs, s.Elapsed)
		add("%-31s %7s  %s", TitleWaits, "MEAN", "TREND")
	} else {
		add("%-31s %7s  %s", TitleWaits, "COUNT", "TREND")
	}
	vals := waitValues(s)
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if o.sort != SortName && vals[keys[i]] != vals[keys[j]] {
			return vals[keys[i]] > vals[keys[j]]
		}
		return keys[i] < keys[j]
	})
	if len(keys) == 0 {
		add("(no active sessions)")
	}
	for _, k := range keys {
		if s.WaitProfile != nil {
			add("%-31s %7.1f  %s", cut(k, 31), vals[k], sparkline(st.trends[k]))
		} else {
			add("%-31s %7d  %s", cut(k, 31), s.Waits[k], sparkline(st.trends[k]))
		}
	}
	add("")

	// Longest-running active queries.
	qs := append([]sampler.Query(nil), s.Queries...)
	if o.sort == SortName {
		sort.SliceStable(qs, func(i, j int) bool { return qs[i].Wait < qs[j].Wait })
	}
	add("%s", TitleQueries)
	add("%7s %9s  %-22s %-20s %s", "PID", "DURATION", "WAIT", "USER@DATABASE", "QUERY")
	if len(qs) == 0 {
		add("%s", cmp.Or(o.noQueries, "(none)"))
	}
	head := len(lines)
	for _, q := range qs {
		prefix := fmt.Sprintf("%7d %9s  %-22s %-20s ", q.PID, durHuman(q.Duration), cut(q.Wait, 22), cut(q.User+"@"+q.Database, 20))
		text := q.Text
		if q.Workers > 0 {
			text = fmt.Sprintf("[+%d workers] %s", q.Workers, text)
		}
		add("%s%s", prefix, cut(text, max(o.width-runewidth.StringWidth(prefix), 10)))
	}
	// On a short screen drop query rows first.
	if o.height > 0 {
		room := o.height - 1 // the footer
		if o.footer == "" {
			room = o.height
		}
		if len(lines) > room && room > head {
			lines = lines[:max(room, head)]
		}
	}
	return fit(lines, o)
}

// maxOtherRows is how many other databases the overview lists.
const maxOtherRows = 5

// otherCatalogLines are the overview's lines for other databases'
// catalogs: which were read and when, then the busiest (most pg_class
// inserts + updates per second, then largest) with size, growth and
// relation-file churn; nothing when none were read.
func otherCatalogLines(others []sampler.DatabaseCatalog, at time.Time) []string {
	if len(others) == 0 {
		return nil
	}
	names := make([]string, len(others))
	for i, d := range others {
		names[i] = d.Database
	}
	out := []string{fmt.Sprintf("other databases' catalogs (own connection each, read at %s): %s", at.Format("15:04:05"), strings.Join(names, ", "))}
	ds := slices.Clone(others)
	sort.SliceStable(ds, func(i, j int) bool {
		if (ds[i].Error == "") != (ds[j].Error == "") {
			return ds[i].Error == ""
		}
		if a, b := ds[i].RelFilesPerS(), ds[j].RelFilesPerS(); a != b {
			return a > b
		}
		return ds[i].CatalogBytes() > ds[j].CatalogBytes()
	})
	for i, d := range ds {
		if i == maxOtherRows {
			out = append(out, fmt.Sprintf("  ... and %d more", len(ds)-maxOtherRows))
			break
		}
		if d.Error != "" {
			out = append(out, fmt.Sprintf("  %s: %s", d.Database, d.Error))
			continue
		}
		out = append(out, fmt.Sprintf("  %s: catalog %s (%s/s), rel files %.1f/s", d.Database, bytesHuman(float64(d.CatalogBytes())), signedBytes(d.CatalogGrowth()), d.RelFilesPerS()))
	}
	return out
}

// fit cuts every line to the width and appends the footer.
func fit(lines []string, o viewOpts) string {
	var b strings.Builder
	for _, l := range lines {
		if o.width > 0 {
			l = cut(l, o.width)
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if o.footer != "" {
		b.WriteString(cut(o.footer, max(o.width, 1)))
	}
	return b.String()
}

// cut truncates s to w display cells, marking the cut with "…".
func cut(s string, w int) string {
	if w <= 0 || runewidth.StringWidth(s) <= w {
		return s
	}
	return runewidth.Truncate(s, w, "…")
}

var sparks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws counts (or means) scaled to their maximum ("" for no
// history).
func sparkline[T int | float64](h []T) string {
	var m T
	for _, v := range h {
		m = max(m, v)
	}
	var b strings.Builder
	for _, v := range h {
		if m == 0 {
			b.WriteRune(sparks[0])
			continue
		}
		b.WriteRune(sparks[int(float64(v)*float64(len(sparks)-1)/float64(m))])
	}
	return b.String()
}

// bytesHuman formats a byte count (or rate) with binary units.
func bytesHuman(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", v)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

func signedBytes(v float64) string {
	if v < 0 {
		return "-" + bytesHuman(-v)
	}
	return "+" + bytesHuman(v)
}

// durHuman formats a query duration: "850 ms", "12.3 s", "4m05s", "2h03m".
func durHuman(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// shortVersion keeps the number of a server_version such as
// "15.18 (Debian 15.18-0+deb12u1)".
func shortVersion(v string) string {
	if i := strings.IndexByte(v, ' '); i > 0 {
		return v[:i]
	}
	return v
}
