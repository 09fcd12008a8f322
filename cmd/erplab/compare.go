package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/results"
)

// newCompareCmd is `erplab compare BASELINE.json VARIANT.json [...]`.
// Exit codes: 0 compared (no regression, or --fail-on-regression not
// given); 1 an input could not be read; 2 bad usage; 99 (exitThreshold)
// with --fail-on-regression when some row of some variant is "worse".
func newCompareCmd() *cobra.Command {
	var (
		format     string
		alpha      float64
		minEffect  float64
		failOnRegr bool
	)
	cmd := &cobra.Command{
		Use:   "compare BASELINE.json VARIANT.json [VARIANT.json...]",
		Short: "Compare run results: per key operation, integral and observations, with verdicts",
		Long: `compare sets each VARIANT run beside the BASELINE run (results files of erplab run):
per key operation and for the integral APDEX, p50/p95/p99, throughput and errors, plus the
observations (wait events, host CPU, catalog growth, temp files), with deltas and a verdict
per row: better, worse or no significant difference.

A row is better or worse when its test is significant after Holm's correction over all the
comparison's tested rows (family-wise --alpha) and the relative difference reaches
--min-effect. Tests: APDEX and error rate two-proportion z-test on zone counts; percentiles
Mann-Whitney U over per-interval percentiles; throughput and rates Welch's t-test over
per-interval values (see internal/compare).

Exit codes: 0 compared; 1 an input could not be read; 2 bad usage; 99 with
--fail-on-regression when any row is "worse" (for CI gating).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "markdown" && format != "json" {
				return withCode(exitUsage, fmt.Errorf("--format must be text, markdown or json, got %q", format))
			}
			opts := compare.Options{Alpha: alpha, MinEffect: minEffect}
			if !(alpha > 0 && alpha < 1) || !(minEffect >= 0) {
				return withCode(exitUsage, fmt.Errorf("--alpha must be in (0, 1) and --min-effect >= 0 (got %g, %g)", alpha, minEffect))
			}
			docs := make([]*results.Document, len(args))
			for i, p := range args {
				d, err := results.Read(p)
				if err != nil {
					return withCode(exitError, err)
				}
				docs[i] = d
			}
			var cs []*compare.Comparison
			for i := 1; i < len(docs); i++ {
				c, err := compare.Compare(args[0], docs[0], args[i], docs[i], opts)
				if err != nil {
					return withCode(exitError, err)
				}
				cs = append(cs, c)
			}
			out := cmd.OutOrStdout()
			for i, c := range cs {
				var err error
				switch format {
				case "json":
					if i == 0 {
						err = compare.WriteJSON(out, cs)
					}
				case "markdown":
					if i > 0 {
						fmt.Fprintln(out)
					}
					err = c.WriteMarkdown(out)
				default:
					if i > 0 {
						fmt.Fprintln(out)
					}
					err = c.WriteText(out)
				}
				if err != nil {
					return withCode(exitError, err)
				}
			}
			if failOnRegr {
				worse := 0
				for _, c := range cs {
					worse += c.Count(compare.Worse)
				}
				if worse > 0 {
					return withCode(exitThreshold, fmt.Errorf("regression: %d row(s) worse than the baseline", worse))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "text", "output: text, markdown or json")
	f.Float64Var(&alpha, "alpha", compare.DefaultAlpha, "family-wise significance level (Holm) over the tested rows")
	f.Float64Var(&minEffect, "min-effect", compare.DefaultMinEffect, "smallest relative difference that counts as better or worse (0.05 = 5 %)")
	f.BoolVar(&failOnRegr, "fail-on-regression", false, "exit 99 when any row is worse than the baseline")
	return cmd
}
