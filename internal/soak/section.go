package soak

import (
	"fmt"

	"github.com/erplab/erplab/internal/exitcode"
)

// Format names the extra.soak section's version.
const Format = "erplab-soak/1"

// ErrCollapse is wrapped by the error that ends a run at a collapse
// (--stop-on-collapse); it carries exit code exitcode.Collapse.
var ErrCollapse = exitcode.New(exitcode.Collapse, "collapse")

// CollapseError is the error of a collapse in window w for reason.
func CollapseError(w Window, reason string) error {
	return fmt.Errorf("%w at %s (window %d): %s (--stop-on-collapse)", ErrCollapse, fmtMin(w.ToS), w.I, reason)
}

// Section is extra.soak (see the package doc).
type Section struct {
	Format   string     `json:"format"`
	WindowS  float64    `json:"window_s"`
	Rule     RuleParams `json:"rule"`
	Limits   *Limits    `json:"limits,omitempty"`
	Windows  []Window   `json:"windows"`
	Trends   []Trend    `json:"trends,omitempty"`
	Warnings []Warning  `json:"warnings,omitempty"`
	Collapse *Collapsed `json:"collapse,omitempty"`
	// Errors says why figures are missing (the soak's own query failed),
	// once per kind.
	Errors []string `json:"errors,omitempty"`
}

// Collapsed is the window that crossed a --stop-on-collapse limit.
type Collapsed struct {
	TS     float64 `json:"t_s"`
	Window int     `json:"window"`
	Reason string  `json:"reason"`
}
