package top

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	tea "github.com/charmbracelet/bubbletea"

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
	// Rule is the storm rule (zero: storm.DefaultRule()).
	Rule storm.Rule
	// OnSample and OnStorm, when set, see every sample and storm (e.g. a
	// metrics.Exporter).
	OnSample func(*sampler.Sample)
	OnStorm  func(storm.Event)
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
	return nil
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
	st, err := newState(s.Info(), opts.Rule, opts.OnStorm)
	if err != nil {
		return err
	}
	take := func() error {
		smp, err := s.Sample(ctx)
		if err != nil {
			return err
		}
		st.info = s.Info()
		st.add(smp)
		if opts.OnSample != nil {
			opts.OnSample(smp)
		}
		return nil
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
		if _, err := io.WriteString(w, render(st, viewOpts{width: opts.Width, interval: opts.Interval})); err != nil {
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
	st, err := newState(s.Info(), opts.Rule, opts.OnStorm)
	if err != nil {
		return err
	}
	m := &model{ctx: ctx, s: s, st: st, opts: opts, interval: opts.Interval, width: 100, height: 40}
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
		s   *sampler.Sample
		err error
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
}

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
	return func() tea.Msg {
		smp, err := m.s.Sample(m.ctx)
		return sampleMsg{smp, err}
	}
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tickMsg:
		if msg.gen != m.gen {
			return m, nil // a chain replaced after an interval change
		}
		if m.paused {
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
		m.st.info = m.s.Info()
		m.st.add(msg.s)
		if m.opts.OnSample != nil {
			m.opts.OnSample(msg.s)
		}
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "esc", "ctrl+c":
			return m, tea.Quit
		case "p", " ":
			m.paused = !m.paused
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
	return render(m.st, viewOpts{
		width: m.width, height: m.height, interval: m.interval, sort: m.sort, paused: m.paused, errLine: m.errLine,
		footer: "q quit  p pause  +/- interval  s sort (count/name)",
	})
}
