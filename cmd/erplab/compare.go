package main

import (
	"fmt"
	"strings"

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
		maxForeign float64
		noiseGuard bool
		primary    []string
	)
	cmd := &cobra.Command{
		Use:   "compare BASELINE.json[,ROUND2.json...] VARIANT.json[,ROUND2.json...] [VARIANT...]",
		Short: "Compare run results: per key operation, integral and observations, with verdicts",
		Long: `compare sets each VARIANT beside the BASELINE (results files of erplab run):
per key operation and for the integral APDEX, p50/p95/p99, throughput and errors, plus the
observations (wait events, the server's own CPU, catalog growth, temp files), with the effect
B-A, its 95 % interval and a verdict per row.

A side may be several rounds, comma-separated (the files erplab ab writes, NAME-1.json,
NAME-2.json, ...): the rows then come from the per-round values, Welch's t over rounds, and only
rounds decide: one file per side is compared by a moving-block bootstrap over the two runs'
intervals, shows each row's effect, interval and p-value, reads "inconclusive: one round each"
and ends with one line saying how many rounds a side would decide the clearest row (a --primary
row when given). With rounds a row is better or worse when its p-value is significant after
Holm's correction over all tested rows (within each family with --primary; family-wise --alpha)
and the whole interval lies beyond the minimum effect (--min-effect of A, and a floor per
metric). A row without a value on a side, or with too few intervals or rounds, is n/a (the reason
follows); one whose values do not vary is "no significant difference" untested. A noise line
gives the starvation of each side: the time the server's processes and erplab's threads waited
for a CPU per ms they ran (schedstat run delay, with steal); a decided row reads "inconclusive:
starvation differed" when its B/A (or A/B) is within the square of the sides' contention ratio,
or a latency moved by no more than the more starved side's extra run delay per operation: an
effect the starvation difference could explain (--noise-guard=false turns this off). The
foreign CPU is shown for information.
Warnings say when workloads, data scales (the data set a run ran on) or durations differ (see internal/compare/doc.go).

--primary SUBJECT[:METRIC[:AIM]] (repeatable, e.g. --primary integral --primary temp_table_storm:apdex;
AIM lower or higher makes a share's aimed-for change better, e.g. 'cpu file system:share_pct:lower')
declares primary rows, as erplab ab does from its remedies: Holm over them alone decides the
primary verdict line (the rules in erplab ab --help); the other rows are exploratory, with a Holm
family of their own. The line names the primary rows tested, those that could not be tested and
why, and the exploratory rows listed and tested; --format json has it as primary.line. A
declared row no comparison has is a usage error that lists the subject's metrics (apdex, p50_ms,
p95_ms, p99_ms, per_second, error_pct for an operation), or for an unknown subject the operations.

Exit codes: 0 compared; 1 an input could not be read; 2 bad usage; 99 with
--fail-on-regression when any row is "worse" (for CI gating).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "markdown" && format != "json" {
				return withCode(exitUsage, fmt.Errorf("--format must be text, markdown or json, got %q", format))
			}
			opts := compare.Options{Alpha: alpha, MinEffect: minEffect, MaxForeignDiff: maxForeign, NoiseGuardOff: !noiseGuard, PrimarySource: "--primary"}
			for _, s := range primary {
				k, err := compare.ParseKey(s)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--primary: %w", err))
				}
				opts.Primary = append(opts.Primary, k)
			}
			if !(alpha > 0 && alpha < 1) || !(minEffect >= 0) {
				return withCode(exitUsage, fmt.Errorf("--alpha must be in (0, 1) and --min-effect >= 0 (got %g, %g)", alpha, minEffect))
			}
			names := make([][]string, len(args))
			docs := make([][]*results.Document, len(args))
			for i, arg := range args {
				for _, p := range strings.Split(arg, ",") {
					if p == "" {
						return withCode(exitUsage, fmt.Errorf("empty file name in %q", arg))
					}
					d, err := results.Read(p)
					if err != nil {
						return err
					}
					names[i], docs[i] = append(names[i], p), append(docs[i], d)
				}
				if i > 0 && (len(docs[i]) == 1) != (len(docs[0]) == 1) {
					return withCode(exitUsage, fmt.Errorf("%d rounds against %d: give one file per side or at least two per side", len(docs[0]), len(docs[i])))
				}
			}
			var cs []*compare.Comparison
			for i := 1; i < len(docs); i++ {
				c, err := compare.CompareRounds(names[0], docs[0], names[i], docs[i], opts)
				if err != nil {
					return err
				}
				if c.Primary != nil && len(c.Primary.Missing) > 0 {
					k := c.Primary.Missing[0]
					return withCode(exitUsage, fmt.Errorf("--primary %s: no such row in %s vs %s: %s", k, args[0], args[i], c.Choices(k)))
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
					return err
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
	f.BoolVar(&noiseGuard, "noise-guard", true, "withhold decided rows the sides' difference in starvation could explain")
	f.Float64Var(&maxForeign, "max-foreign-diff", compare.DefaultMaxForeignDiff, "former foreign CPU guard: negative turns the noise guard off, other values are ignored")
	_ = f.MarkDeprecated("max-foreign-diff", "the noise guard judges starvation now; use --noise-guard=false")
	f.BoolVar(&failOnRegr, "fail-on-regression", false, "exit 99 when any row is worse than the baseline")
	f.StringArrayVar(&primary, "primary", nil, "primary row SUBJECT[:METRIC[:lower|higher]] deciding the verdict line (repeatable); the other rows are exploratory")
	return cmd
}
