package compare

import "fmt"

// Recipe is what a comparison is computed with, in a form results files
// keep: `erplab ab` records it in every run's extra.experiment.compare,
// so that `erplab report` of the runs repeats the comparison ab printed
// (the computation is deterministic: Options.Seed). Primary are the
// variant's primary rows as "SUBJECT:METRIC" (none in the baseline's
// runs) and PrimarySource who declared them; Alpha, MinEffect and
// MaxForeignDiff are Options' (0: the default); NoiseGuardOff too.
type Recipe struct {
	Primary        []string `json:"primary,omitempty"`
	PrimarySource  string   `json:"primary_source,omitempty"`
	Alpha          float64  `json:"alpha"`
	MinEffect      float64  `json:"min_effect"`
	MaxForeignDiff float64  `json:"max_foreign_diff"`
	NoiseGuardOff  bool     `json:"noise_guard_off,omitempty"`
}

// RecipeOf is the Recipe of opts.
func RecipeOf(opts Options) Recipe {
	r := Recipe{PrimarySource: opts.PrimarySource, Alpha: opts.Alpha, MinEffect: opts.MinEffect, MaxForeignDiff: opts.MaxForeignDiff, NoiseGuardOff: opts.NoiseGuardOff}
	for _, k := range opts.Primary {
		r.Primary = append(r.Primary, k.String())
	}
	return r
}

// Options are the comparison options of r. It returns an error for a
// primary row that does not parse (ParseKey).
func (r Recipe) Options() (Options, error) {
	o := Options{PrimarySource: r.PrimarySource, Alpha: r.Alpha, MinEffect: r.MinEffect, MaxForeignDiff: r.MaxForeignDiff, NoiseGuardOff: r.NoiseGuardOff}
	for _, s := range r.Primary {
		k, err := ParseKey(s)
		if err != nil {
			return Options{}, fmt.Errorf("compare: recorded primary: %w", err)
		}
		o.Primary = append(o.Primary, k)
	}
	return o, nil
}

// VerdictLines are the primary verdict of c as erplab ab ends with it and
// erplab report shows it: PrimaryVerdict.Line, then "primary " and
// Row.Brief of each primary row. None without primary rows.
func (c *Comparison) VerdictLines() []string {
	if c.Primary == nil {
		return nil
	}
	out := []string{c.Primary.Line()}
	for _, r := range c.PrimaryRows() {
		out = append(out, "primary "+r.Brief())
	}
	return out
}
