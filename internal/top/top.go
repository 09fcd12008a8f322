package top

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/jackc/pgx/v5"

	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

// Defaults.
const (
	// DefaultQueries is the number of rows of the query table.
	DefaultQueries = 10
	// DefaultWidth is the line width of plain-text output.
	DefaultWidth = 160
)

// intervalSteps are the intervals the +/- keys step through.
var intervalSteps = []time.Duration{
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
}

// Options configure Print and Run.
type Options struct {
	// Interval between samples (default sampler.DefaultInterval, at least
	// sampler.MinInterval).
	Interval time.Duration
	// Width of plain-text lines in display cells (default DefaultWidth);
	// the interactive view uses the terminal's width.
	Width int
	// Rule is the storm rule (zero: storm.DefaultRule()). When its CPUs
	// is 0 and the host is sampled (a local server), CPUs is set to the
	// host's CPU count (Sampler.HostCPUs), turning the crowd rule on as
	// in run.
	Rule storm.Rule
	// OnSample and OnStorm, when set, see every sample and storm (e.g. a
	// metrics.Exporter).
	OnSample func(*sampler.Sample)
	OnStorm  func(storm.Event)
	// Conn is a second session to the server for the sessions and
	// blocking views, full query text and cancel/terminate; nil leaves
	// those out (overview only). Only top uses it, one call at a time.
	Conn *pgx.Conn
	// Dial, when Conn is nil, opens that session on first need (the
	// first switch to the sessions or blocking view), so the overview's
	// counts do not include it until then. Top closes what Dial opened.
	Dial func(ctx context.Context) (*pgx.Conn, error)
	// Invalidation, when set, is called at each sample for one line shown
	// under the temp-relation churn: the shared-invalidation events the
	// caller counts (erplab top: perf uprobes, profile.LiveLine), or why
	// they are not counted.
	Invalidation func() string
	// View is the screen Print shows and Run starts on.
	View View
	// Filter narrows the sessions and blocking views.
	Filter Filter
	// Record, when set, gets every sample as a frame (record.go), with
	// every client session read on the second session (Conn or Dial)
	// when there is one; the views filter those rows with Filter. The
	// caller closes it.
	Record *Recorder
}

func (o *Options) normalize() error {
	if o.Interval == 0 {
		o.Interval = sampler.DefaultInterval
	}
	if o.Interval < sampler.MinInterval {
		return fmt.Errorf("interval must be at least %s, got %s", sampler.MinInterval, o.Interval)
	}
	if o.Width <= 0 {
		o.Width = DefaultWidth
	}
	if o.View != ViewOverview && o.Conn == nil && o.Dial == nil {
		return fmt.Errorf("the %s view needs Options.Conn or Dial", o.View)
	}
	return nil
}

// conn returns Options.Conn, dialling it once through Dial; the bool
// says whether it was dialled here (and is the caller's to close).
func (o *Options) conn(ctx context.Context) (*pgx.Conn, bool, error) {
	if o.Conn != nil {
		return o.Conn, false, nil
	}
	if o.Dial == nil {
		return nil, false, errors.New("top: no session for the sessions view")
	}
	c, err := o.Dial(ctx)
	if err != nil {
		return nil, false, err
	}
	o.Conn = c
	return c, true, nil
}

// screen renders view v: the overview from st, or the sessions or
// blocking view from ss (read by ReadSessions), cut to o's width.
func screen(st *state, v View, ss []Session, o viewOpts, f Filter, sel int, detail string) string {
	switch v {
	case ViewSessions:
		return fit(append(headLines(st, o), renderSessions(ss, f, sel, detail)...), o)
	case ViewBlocking:
		return fit(append(headLines(st, o), renderBlocking(Blocking(ss))...), o)
	}
	return render(st, o)
}

// headLines is the first line of the overview (server, time, interval)
// above the other views.
func headLines(st *state, o viewOpts) []string {
	full := strings.SplitN(render(st, viewOpts{width: o.width, interval: o.interval, sort: o.sort, paused: o.paused, replay: o.replay}), "\n", 2)
	return []string{full[0], ""}
}

// Print writes count plain-text snapshots to w, one every interval. It
// takes a first sample at once so that the first snapshot (after one
// interval) has rates. s should have been made with Options.Queries > 0
// for the query table. Errors: a sample failing, ctx ending (returned as
// ctx.Err()), an invalid interval or storm rule.
func Print(ctx context.Context, w io.Writer, s *sampler.Sampler, opts Options, count int) error {
	if err := opts.normalize(); err != nil {
		return err
	}
	if count < 1 {
		return fmt.Errorf("count must be >= 1, got %d", count)
	}
	st, err := newState(s.Info(), opts.Rule, s.HostCPUs(), opts.OnStorm)
	if err != nil {
		return err
	}
	if opts.View != ViewOverview {
		if _, dialled, err := opts.conn(ctx); err != nil {
			return err
		} else if dialled {
			defer opts.Conn.Close(context.WithoutCancel(ctx))
		}
	}
	if opts.Record != nil {
		if err := opts.Record.begin(s.Info(), st.start, opts.Interval, opts.Conn != nil || opts.Dial != nil); err != nil {
			return err
		}
		if _, dialled, err := opts.conn(ctx); err != nil {
			return err
		} else if dialled {
			defer opts.Conn.Close(context.WithoutCancel(ctx))
		}
	}
	var list []Session // every session, when recording
	take := func() error {
		smp, err := s.Sample(ctx)
		if err != nil {
			return err
		}
		st.info = s.Info()
		st.add(smp)
		if opts.Invalidation != nil {
			st.inval = opts.Invalidation()
		}
		if opts.OnSample != nil {
			opts.OnSample(smp)
		}
		if opts.Record == nil {
			return nil
		}
		if list, err = ReadSessions(ctx, opts.Conn, Filter{}); err != nil {
			return err
		}
		return opts.Record.Add(frameOf(st, list))
	}
	if err := take(); err != nil {
		return err
	}
	for i := 0; i < count; i++ {
		t := time.NewTimer(opts.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if err := take(); err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		var ss []Session
		switch {
		case opts.View == ViewOverview:
		case opts.Record != nil:
			ss = opts.Filter.apply(list)
		default:
			if ss, err = ReadSessions(ctx, opts.Conn, opts.Filter); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(w, screen(st, opts.View, ss, viewOpts{width: opts.Width, interval: opts.Interval}, opts.Filter, -1, "")); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	return nil
}

// Run shows the interactive view on a terminal (in and out) until the
// user quits (q, Esc or Ctrl-C) or ctx ends. Keys: + and - change the
// interval, p or space pauses, s switches the sort order. A failing sample
// shows as an error line and sampling goes on (the sampler reconnects).
func Run(ctx context.Context, s *sampler.Sampler, opts Options, in io.Reader, out io.Writer) error {
	if err := opts.normalize(); err != nil {
		return err
	}
	st, err := newState(s.Info(), opts.Rule, s.HostCPUs(), opts.OnStorm)
	if err != nil {
		return err
	}
	if opts.Record != nil {
		if err := opts.Record.begin(s.Info(), st.start, opts.Interval, opts.Conn != nil || opts.Dial != nil); err != nil {
			return err
		}
	}
	m := &model{ctx: ctx, s: s, st: st, opts: opts, interval: opts.Interval, width: 100, height: 40, view: opts.View}
	defer func() {
		if m.dialled != nil {
			m.dialled.Close(context.WithoutCancel(ctx))
		}
	}()
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen())
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("terminal: %w", err)
	}
	return nil
}

// Messages of the interactive model.
type (
	tickMsg   struct{ gen int }
	sampleMsg struct {
		s        *sampler.Sample
		sessions []Session
		err      error
	}
	// actionMsg is the outcome of a cancel, terminate or full-query call.
	actionMsg struct {
		line   string
		detail string
	}
)

// model is the bubbletea model. Sampling runs in a command goroutine, one
// at a time (busy); a chain of ticks, restarted when the interval
// changes (gen), asks for samples.
type model struct {
	ctx           context.Context
	s             *sampler.Sampler
	st            *state
	opts          Options
	interval      time.Duration
	sort          SortMode
	paused, busy  bool
	gen           int
	width, height int
	errLine       string
	// The sessions and blocking views: view shown, sessions of the last
	// sample, selected row, full query shown, confirmation pending
	// (Cancel or Terminate of confirmPID), last action's outcome.
	view       View
	sessions   []Session
	sel        int
	detail     string
	confirm    Signal
	confirmPID int
	note       string
	// frozen is the screen kept while paused and recording.
	frozen  string
	connMu  sync.Mutex // one call at a time on opts.Conn
	dialled *pgx.Conn  // opened through opts.Dial, closed by Run
}

// conn returns the second session, dialling it on first use; call with
// connMu held.
func (m *model) conn() (*pgx.Conn, error) {
	c, dialled, err := m.opts.conn(m.ctx)
	if dialled {
		m.dialled = c
	}
	return c, err
}

// hasConn reports whether the views that need the second session work.
func (m *model) hasConn() bool { return m.opts.Conn != nil || m.opts.Dial != nil }

func (m *model) Init() tea.Cmd { return tea.Batch(m.sample(), m.tick()) }

func (m *model) tick() tea.Cmd {
	gen := m.gen
	return tea.Tick(m.interval, func(time.Time) tea.Msg { return tickMsg{gen: gen} })
}

func (m *model) sample() tea.Cmd {
	if m.busy {
		return nil
	}
	m.busy = true
	f, need := m.opts.Filter, (m.view != ViewOverview || m.opts.Record != nil) && m.hasConn()
	if m.opts.Record != nil {
		f = Filter{} // every session recorded; the view filters
	}
	return func() tea.Msg {
		smp, err := m.s.Sample(m.ctx)
		if err != nil || !need {
			return sampleMsg{s: smp, err: err}
		}
		m.connMu.Lock()
		defer m.connMu.Unlock()
		conn, err := m.conn()
		if err != nil {
			return sampleMsg{s: smp, err: err}
		}
		ss, err := ReadSessions(m.ctx, conn, f)
		return sampleMsg{s: smp, sessions: ss, err: err}
	}
}

// selected returns the selected session, if any.
func (m *model) selected() (Session, bool) {
	if m.view != ViewSessions || m.sel < 0 || m.sel >= len(m.sessions) {
		return Session{}, false
	}
	return m.sessions[m.sel], true
}

// act runs fn on the second session in a command.
func (m *model) act(fn func(ctx context.Context, conn *pgx.Conn) actionMsg) tea.Cmd {
	return func() tea.Msg {
		m.connMu.Lock()
		defer m.connMu.Unlock()
		conn, err := m.conn()
		if err != nil {
			return actionMsg{line: err.Error()}
		}
		return fn(m.ctx, conn)
	}
}

// key handles the keys of the sessions and blocking views; handled
// false leaves the key to the overview's handling.
func (m *model) key(k string) (tea.Cmd, bool) {
	if m.confirm != "" {
		sig, pid := m.confirm, m.confirmPID
		m.confirm = ""
		if k != "y" {
			m.note = string(sig) + " of pid " + fmt.Sprint(pid) + " not sent"
			return nil, true
		}
		return m.act(func(ctx context.Context, conn *pgx.Conn) actionMsg {
			ok, err := Kill(ctx, conn, pid, sig)
			switch {
			case err != nil:
				return actionMsg{line: err.Error()}
			case !ok:
				return actionMsg{line: fmt.Sprintf("%s of pid %d: not sent (gone, or the role may not signal it)", sig, pid)}
			}
			return actionMsg{line: fmt.Sprintf("%s of pid %d sent", sig, pid)}
		}), true
	}
	if !m.hasConn() {
		return nil, false
	}
	switch k {
	case "v":
		m.view = (m.view + 1) % View(len(viewNames))
		m.detail, m.note = "", ""
		return nil, true
	case "up":
		m.sel = max(m.sel-1, 0)
		m.detail = ""
		return nil, true
	case "down":
		m.sel = min(m.sel+1, max(len(m.sessions)-1, 0))
		m.detail = ""
		return nil, true
	}
	s, ok := m.selected()
	if !ok {
		return nil, false
	}
	switch k {
	case "enter":
		if m.detail != "" {
			m.detail = ""
			return nil, true
		}
		pid := s.PID
		return m.act(func(ctx context.Context, conn *pgx.Conn) actionMsg {
			q, err := FullQuery(ctx, conn, pid)
			if err != nil {
				return actionMsg{line: err.Error()}
			}
			return actionMsg{detail: q}
		}), true
	case "c":
		m.confirm, m.confirmPID = Cancel, s.PID
		m.note = fmt.Sprintf("cancel the query of pid %d (%s, %s)? y to confirm, any other key aborts", s.PID, s.Application, oneLine(s.Query))
		return nil, true
	case "T":
		m.confirm, m.confirmPID = Terminate, s.PID
		m.note = fmt.Sprintf("TERMINATE session pid %d (%s@%s, %s)? y to confirm, any other key aborts", s.PID, s.User, s.Database, s.Application)
		return nil, true
	}
	return nil, false
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tickMsg:
		if msg.gen != m.gen {
			return m, nil // a chain replaced after an interval change
		}
		if m.paused && m.opts.Record == nil {
			return m, m.tick()
		}
		return m, tea.Batch(m.sample(), m.tick())
	case sampleMsg:
		m.busy = false
		if msg.err != nil {
			m.errLine = msg.err.Error()
			return m, nil
		}
		m.errLine = ""
		m.sessions = msg.sessions
		m.st.info = m.s.Info()
		m.st.add(msg.s)
		if m.opts.Invalidation != nil {
			m.st.inval = m.opts.Invalidation()
		}
		if m.opts.OnSample != nil {
			m.opts.OnSample(msg.s)
		}
		if r := m.opts.Record; r != nil {
			if err := r.Add(frameOf(m.st, msg.sessions)); err != nil {
				m.errLine = err.Error()
			}
			m.sessions = m.opts.Filter.apply(msg.sessions)
		}
		if m.sel >= len(m.sessions) {
			m.sel = max(len(m.sessions)-1, 0)
		}
	case actionMsg:
		m.note, m.detail = msg.line, msg.detail
	case tea.KeyMsg:
		if cmd, ok := m.key(msg.String()); ok {
			return m, cmd
		}
		switch msg.String() {
		case "q", "esc", "ctrl+c":
			return m, tea.Quit
		case "p", " ":
			m.paused = !m.paused
			m.frozen = ""
			if m.paused && m.opts.Record != nil {
				m.frozen = m.View() // the recording goes on; the screen stays
			}
		case "s":
			m.sort = (m.sort + 1) % 2
		case "+", "=":
			return m, m.setInterval(+1)
		case "-", "_":
			return m, m.setInterval(-1)
		}
	}
	return m, nil
}

// setInterval moves to the next longer (dir > 0) or shorter interval step
// and restarts the tick chain.
func (m *model) setInterval(dir int) tea.Cmd {
	i := 0
	for i < len(intervalSteps)-1 && intervalSteps[i] < m.interval {
		i++
	}
	switch {
	case dir > 0 && intervalSteps[i] <= m.interval && i < len(intervalSteps)-1:
		i++
	case dir < 0 && i > 0:
		i--
	}
	m.interval = intervalSteps[i]
	m.gen++
	return m.tick()
}

func (m *model) View() string {
	if m.paused && m.frozen != "" {
		return m.frozen
	}
	footer := "q quit  p pause  +/- interval  s sort (count/name)"
	if m.hasConn() {
		footer += "  v view (" + m.view.String() + ")"
		if m.view == ViewSessions {
			footer += "  up/down select  enter full query  c cancel  T terminate"
		}
	}
	if m.note != "" {
		footer = m.note + "\n" + footer
	}
	o := viewOpts{width: m.width, height: m.height, interval: m.interval, sort: m.sort, paused: m.paused, errLine: m.errLine, footer: footer}
	sel := -1
	if m.view == ViewSessions {
		sel = m.sel
	}
	return screen(m.st, m.view, m.sessions, o, m.opts.Filter, sel, m.detail)
}
