package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// ThinkTime is the pause a virtual user takes between two key operations,
// like a person reading a form before the next click.
type ThinkTime struct {
	// Kind is "fixed" (always Min), "uniform" (uniform in [Min, Max]) or
	// "exp" (exponential with mean Min, capped at 10 x mean so one VU
	// cannot vanish for the rest of a short run).
	Kind     string
	Min, Max time.Duration
}

// ParseThinkTime parses "0", "2s" (fixed), "1s-5s" (uniform) or "exp:3s"
// (exponential with that mean).
func ParseThinkTime(s string) (ThinkTime, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return ThinkTime{Kind: "fixed"}, nil
	}
	if mean, ok := strings.CutPrefix(s, "exp:"); ok {
		d, err := time.ParseDuration(mean)
		if err != nil || d < 0 {
			return ThinkTime{}, fmt.Errorf("think time %q: want exp:MEAN with MEAN a duration >= 0, e.g. exp:3s", s)
		}
		return ThinkTime{Kind: "exp", Min: d}, nil
	}
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		a, err1 := time.ParseDuration(lo)
		b, err2 := time.ParseDuration(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return ThinkTime{}, fmt.Errorf("think time %q: want MIN-MAX with 0 <= MIN <= MAX, e.g. 1s-5s", s)
		}
		return ThinkTime{Kind: "uniform", Min: a, Max: b}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return ThinkTime{}, fmt.Errorf("think time %q: want a duration (2s), a range (1s-5s) or exp:MEAN", s)
	}
	return ThinkTime{Kind: "fixed", Min: d}, nil
}

// Mean is the expected think time.
func (t ThinkTime) Mean() time.Duration {
	if t.Kind == "uniform" {
		return (t.Min + t.Max) / 2
	}
	return t.Min
}

// Draw returns one think time.
func (t ThinkTime) Draw(r *rand.Rand) time.Duration {
	switch t.Kind {
	case "uniform":
		if t.Max == t.Min {
			return t.Min
		}
		return t.Min + time.Duration(r.Int64N(int64(t.Max-t.Min)+1))
	case "exp":
		d := time.Duration(r.ExpFloat64() * float64(t.Min))
		if limit := 10 * t.Min; d > limit {
			d = limit
		}
		return d
	default:
		return t.Min
	}
}

// String renders the think time as it is parsed.
func (t ThinkTime) String() string {
	switch t.Kind {
	case "uniform":
		return t.Min.String() + "-" + t.Max.String()
	case "exp":
		return "exp:" + t.Min.String()
	default:
		return t.Min.String()
	}
}
