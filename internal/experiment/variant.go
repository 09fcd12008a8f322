package experiment

import (
	"fmt"
	"strings"

	"github.com/erplab/erplab/internal/remedy"
)

// Variant is a named set of remedies; the baseline has none.
type Variant struct {
	Name     string
	Remedies []remedy.Remedy
}

// ParseVariant parses "NAME=remedy[,remedy...]" (each remedy as
// remedy.Parse reads it, from the kinds registered). The name must be a
// word of letters, digits, '-' and '_' (it names files and databases) and
// not "baseline". A remedy kind may appear once.
func ParseVariant(s string) (Variant, error) {
	name, list, ok := strings.Cut(s, "=")
	if !ok || name == "" || list == "" {
		return Variant{}, fmt.Errorf("--variant %q: want NAME=remedy[,remedy...]", s)
	}
	if name == BaselineName {
		return Variant{}, fmt.Errorf("--variant %q: the name %q is taken by the baseline", s, BaselineName)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') || len(name) > 40 {
			return Variant{}, fmt.Errorf("--variant %q: the name must be up to 40 letters, digits, '-' or '_'", s)
		}
	}
	v := Variant{Name: name}
	seen := map[string]bool{}
	for _, part := range strings.Split(list, ",") {
		r, err := remedy.Parse(part)
		if err != nil {
			return Variant{}, fmt.Errorf("--variant %s: %w", name, err)
		}
		if seen[r.Kind] {
			return Variant{}, fmt.Errorf("--variant %s: remedy %s given twice", name, r.Kind)
		}
		seen[r.Kind] = true
		v.Remedies = append(v.Remedies, r)
	}
	return v, nil
}

// CheckVariants validates the variants of one experiment before anything
// is built: every name once (the baseline's included), and every remedy
// that sets a workload option (remedy.Kind.WorkloadFlag) on a workload
// that has it (declares reports whether the workload declares a flag).
// The error is a one-line usage error.
func CheckVariants(workloadName string, vs []Variant, declares func(flag string) bool) error {
	seen := map[string]bool{BaselineName: true}
	for _, v := range vs {
		if seen[v.Name] {
			return fmt.Errorf("--variant %s: the name is given twice", v.Name)
		}
		seen[v.Name] = true
		for _, r := range v.Remedies {
			k, ok := remedy.Lookup(r.Kind)
			if ok && k.WorkloadFlag != "" && !declares(k.WorkloadFlag) {
				return fmt.Errorf("--variant %s: remedy %s sets --%s, which --workload %s does not have", v.Name, r.Kind, k.WorkloadFlag, workloadName)
			}
		}
	}
	return nil
}
