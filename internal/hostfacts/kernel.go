package hostfacts

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// VMStat reads the counters named in keys from a /proc/vmstat file ("name
// value" per line, proc(5)). Keys the file lacks (e.g. no THP support) are
// absent from the map; an unparsable value of a wanted key is an error
// naming the file.
func VMStat(path string, keys ...string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("vmstat: %w", err)
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	out := make(map[string]uint64, len(keys))
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, val, ok := bytes.Cut(sc.Bytes(), []byte{' '})
		if !ok || !want[string(name)] {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(val)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("vmstat: %s: %s: %w", path, name, err)
		}
		out[string(name)] = n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("vmstat: %s: %w", path, err)
	}
	return out, nil
}

// Selected returns the bracketed word of a sysfs choice line such as
// "always [madvise] never" (Documentation/admin-guide/mm/transhuge.rst),
// or "" when no word is bracketed.
func Selected(line string) string {
	i := strings.IndexByte(line, '[')
	j := strings.IndexByte(line, ']')
	if i < 0 || j < i {
		return ""
	}
	return line[i+1 : j]
}

// CPU is the CPU time split over an interval, % of all CPUs.
type CPU struct {
	User    float64 `json:"user_pct,omitempty"`
	Nice    float64 `json:"nice_pct,omitempty"`
	System  float64 `json:"system_pct,omitempty"`
	Iowait  float64 `json:"iowait_pct,omitempty"`
	IRQ     float64 `json:"irq_pct,omitempty"`
	SoftIRQ float64 `json:"softirq_pct,omitempty"`
	Steal   float64 `json:"steal_pct,omitempty"`
	Idle    float64 `json:"idle_pct"`
	// Busy is User+Nice+System+IRQ+SoftIRQ+Steal: time not idle and not
	// waiting for I/O.
	Busy float64 `json:"busy_pct"`
}

// Split turns two readings of the /proc/stat "cpu" line into shares of
// the interval, %, rounded to 0.01. Guest and GuestNice are not added: the
// kernel already counts them in User and Nice (proc(5)).
func Split(a, b procfs.CPUStat) CPU {
	d := func(x, y float64) float64 { return max(y-x, 0) }
	user, nice, sys := d(a.User, b.User), d(a.Nice, b.Nice), d(a.System, b.System)
	idle, iow := d(a.Idle, b.Idle), d(a.Iowait, b.Iowait)
	irq, soft, steal := d(a.IRQ, b.IRQ), d(a.SoftIRQ, b.SoftIRQ), d(a.Steal, b.Steal)
	total := user + nice + sys + idle + iow + irq + soft + steal
	if total <= 0 {
		return CPU{}
	}
	p := func(x float64) float64 { return math.Round(10000*x/total) / 100 }
	return CPU{User: p(user), Nice: p(nice), System: p(sys), Iowait: p(iow), IRQ: p(irq), SoftIRQ: p(soft),
		Steal: p(steal), Idle: p(idle), Busy: p(user + nice + sys + irq + soft + steal)}
}
