package top

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// PlayOptions configure PrintPlay and RunPlay.
type PlayOptions struct {
	// View is the screen shown (the sessions and blocking views need a
	// recording with sessions: Header.Sessions).
	View View
	// Filter narrows the sessions and blocking views.
	Filter Filter
	// Width of plain-text lines (default DefaultWidth).
	Width int
	// PrintPlay prints the frames from index From up to, not including,
	// To (0: to the last). RunPlay starts at From.
	From, To int
	// Count, when > 0, is the most screens PrintPlay prints.
	Count int
}

func (o *PlayOptions) normalize(r *Recording) error {
	if o.Width <= 0 {
		o.Width = DefaultWidth
	}
	if o.To <= 0 || o.To > r.Len() {
		o.To = r.Len()
	}
	if o.From < 0 || o.From >= r.Len() {
		return fmt.Errorf("no sample %d (the recording has %d)", o.From+1, r.Len())
	}
	if o.From >= o.To {
		return fmt.Errorf("--from is after --to (samples %d and %d)", o.From+1, o.To)
	}
	if o.View != ViewOverview && !r.Header.Sessions {
		return fmt.Errorf("the %s view needs the sessions, which this recording does not hold (the overview only)", o.View)
	}
	return nil
}

// stateAt is the view's state at frame i: the frames of the trend
// window before it pushed in order, as top had them live.
func (r *Recording) stateAt(i int) (*state, *Frame, error) {
	st := &state{info: r.Header.Server, trends: map[string][]float64{}, start: r.Header.Started}
	st.info.Role = r.Header.Role
	j0 := max(0, i-trendLen+1)
	st.n = j0
	var f *Frame
	for j := j0; j <= i; j++ {
		var err error
		if f, err = r.Frame(j); err != nil {
			return nil, nil, err
		}
		st.push(f.sample())
	}
	st.others, st.othersAt, st.storm, st.inval = f.Others, f.OthersAt, f.Storm, f.Inval
	return st, f, nil
}

// replayText is the header's status of frame i.
func (r *Recording) replayText(i int) string {
	return fmt.Sprintf("replay +%s, sample %d/%d", clockDur(r.Offset(i)), i+1, r.Len())
}

// interval is the recorded interval (the default when absent).
func (r *Recording) interval() time.Duration {
	if r.Header.IntervalNs > 0 {
		return r.Header.IntervalNs
	}
	return time.Second
}

// PrintPlay writes the screens of frames From..To (at most Count) of r
// to w as Print writes them live, a blank line between screens.
func PrintPlay(w io.Writer, r *Recording, o PlayOptions) error {
	if err := o.normalize(r); err != nil {
		return err
	}
	n := 0
	for i := o.From; i < o.To && (o.Count <= 0 || n < o.Count); i++ {
		st, f, err := r.stateAt(i)
		if err != nil {
			return err
		}
		if n > 0 {
			fmt.Fprintln(w)
		}
		vo := viewOpts{width: o.Width, interval: r.interval(), replay: r.replayText(i), noQueries: r.noQueries}
		if _, err := io.WriteString(w, screen(st, o.View, o.Filter.apply(f.List), vo, o.Filter, -1, "")); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		n++
	}
	return nil
}

// RunPlay plays r on a terminal until the user quits. Keys: space or p
// pause and resume, left/right step one sample back/forward, [ and ]
// (or pgup/pgdown) jump a minute back/forward, home/end the first and
// last sample, x switches the speed between x1 and x10, s the sort, v
// the view; in the sessions view up/down select and enter shows the
// recorded query text.
func RunPlay(ctx context.Context, r *Recording, o PlayOptions, in io.Reader, out io.Writer) error {
	if err := o.normalize(r); err != nil {
		return err
	}
	m := &playModel{r: r, o: o, i: o.From, speed: 1, width: 100, height: 40, view: o.View, note: r.Note}
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen())
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("terminal: %w", err)
	}
	return nil
}

// playTick advances the player (gen: the tick chain it belongs to).
type playTick struct{ gen int }

// playModel is the bubbletea model of RunPlay.
type playModel struct {
	r             *Recording
	o             PlayOptions
	i             int // frame shown
	paused        bool
	speed         int // 1 or 10
	gen           int
	view          View
	sort          SortMode
	sel           int
	detail        bool
	width, height int
	note          string
}

func (m *playModel) Init() tea.Cmd { return m.tick() }

// tick waits the recorded time to the next frame over the speed (at
// most ten intervals: a gap in the recording is not waited out).
func (m *playModel) tick() tea.Cmd {
	if m.paused || m.i+1 >= m.r.Len() {
		return nil
	}
	d := min(time.Duration(m.r.times[m.i+1]-m.r.times[m.i]), 10*m.r.interval()) / time.Duration(m.speed)
	gen := m.gen
	return tea.Tick(max(d, time.Millisecond), func(time.Time) tea.Msg { return playTick{gen} })
}

// seek shows frame i (clamped) and restarts the tick chain.
func (m *playModel) seek(i int) tea.Cmd {
	m.i = min(max(i, 0), m.r.Len()-1)
	m.detail = false
	m.gen++
	return m.tick()
}

// byTime is the frame d from the shown one's time (the nearest at or
// past it in that direction).
func (m *playModel) byTime(d time.Duration) int {
	t := m.r.times[m.i] + int64(d)
	i := m.i
	if d > 0 {
		for i < m.r.Len()-1 && m.r.times[i] < t {
			i++
		}
	} else {
		for i > 0 && m.r.times[i] > t {
			i--
		}
	}
	return i
}

func (m *playModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case playTick:
		if msg.gen != m.gen || m.paused {
			return m, nil
		}
		return m, m.seek(m.i + 1)
	case tea.KeyMsg:
		return m, m.key(msg.String())
	}
	return m, nil
}

// key handles one key.
func (m *playModel) key(k string) tea.Cmd {
	switch k {
	case "q", "esc", "ctrl+c":
		return tea.Quit
	case "p", " ":
		m.paused = !m.paused
		m.gen++
		return m.tick()
	case "left", "h":
		m.paused = true
		return m.seek(m.i - 1)
	case "right", "l":
		m.paused = true
		return m.seek(m.i + 1)
	case "[", "pgup":
		return m.seek(m.byTime(-time.Minute))
	case "]", "pgdown":
		return m.seek(m.byTime(time.Minute))
	case "home", "g":
		return m.seek(0)
	case "end", "G":
		return m.seek(m.r.Len() - 1)
	case "x":
		m.speed = 11 - m.speed // 1 <-> 10
		m.gen++
		return m.tick()
	case "s":
		m.sort = (m.sort + 1) % 2
	case "v":
		if m.r.Header.Sessions {
			m.view = (m.view + 1) % View(len(viewNames))
			m.detail = false
		}
	case "up":
		m.sel = max(m.sel-1, 0)
		m.detail = false
	case "down":
		m.sel++
		m.detail = false
	case "enter":
		m.detail = !m.detail
	}
	return nil
}

func (m *playModel) View() string {
	st, f, err := m.r.stateAt(m.i)
	if err != nil {
		return "error: " + err.Error() + "\nq quit"
	}
	footer := fmt.Sprintf("q quit  space pause  left/right one sample  [ ] one minute  home/end  x speed (x%d)  s sort", m.speed)
	if m.r.Header.Sessions {
		footer += "  v view (" + m.view.String() + ")"
		if m.view == ViewSessions {
			footer += "  up/down select  enter query"
		}
	}
	if m.note != "" {
		footer = m.note + "\n" + footer
	}
	replay := m.r.replayText(m.i)
	if m.speed != 1 {
		replay += fmt.Sprintf(" x%d", m.speed)
	}
	if m.i == m.r.Len()-1 {
		replay += ", end"
	}
	ss := m.o.Filter.apply(f.List)
	m.sel = min(m.sel, max(len(ss)-1, 0))
	sel, detail := -1, ""
	if m.view == ViewSessions {
		sel = m.sel
		if m.detail && m.sel < len(ss) {
			detail = ss[m.sel].Query
		}
	}
	vo := viewOpts{width: m.width, height: m.height, interval: m.r.interval(), sort: m.sort, paused: m.paused, footer: footer, replay: replay, noQueries: m.r.noQueries}
	return screen(st, m.view, ss, vo, m.o.Filter, sel, detail)
}
