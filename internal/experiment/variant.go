package experiment

import (
	"fmt"
	"strings"

	"github.com/erplab/erplab/internal/compare"
	"github.com/erplab/erplab/internal/remedy"
)

// Variant is a named set of remedies; the baseline has none. Primary,
// when set (ab --primary), overrides the primary rows the remedies
// declare (see Primaries).
type Variant struct {
	Name     string
	Remedies []remedy.Remedy
	Primary  []compare.Key
}

// DeclaredBy is the PrimarySource of rows given on the command line.
const DeclaredBy = "--primary"

// Primaries returns the primary rows of v's comparison with the baseline
// and who declared them: v.Primary when set (source DeclaredBy); else
// the rows its remedies' registrations declare (remedy.Kind.Primary),
// each once, in the remedies' order (source: the remedies' names); else
// the integral APDEX (source "default: integral APDEX"). It returns an
// error when a registration's row does not parse.
func Primaries(v Variant) ([]compare.Key, string, error) {
	if len(v.Primary) > 0 {
		return v.Primary, DeclaredBy, nil
	}
	var keys []compare.Key
	var by []string
	seen := map[compare.Key]bool{}
	for _, r := range v.Remedies {
		k, ok := remedy.Lookup(r.Kind)
		if !ok || len(k.Primary) == 0 {
			continue
		}
		by = append(by, k.Name)
		for _, s := range k.Primary {
			key, err := compare.ParseKey(s)
			if err != nil {
				return nil, "", fmt.Errorf("remedy %s: primary %w", k.Name, err)
			}
			if !seen[key] {
				seen[key] = true
				keys = append(keys, key)
			}
		}
	}
	if len(keys) == 0 {
		return []compare.Key{compare.IntegralApdex}, "default: integral APDEX", nil
	}
	return keys, strings.Join(by, ", "), nil
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

// SetPrimary applies ab's --primary values to vs: each "[VARIANT=]ROW"
// (ROW as compare.ParseKey reads it) adds ROW to the primary rows of
// VARIANT, or of every variant without "VARIANT=", replacing the rows
// the remedies declare; the rows without a variant are also returned
// for the A/A comparisons (Config.AAPrimary). It returns a one-line
// usage error for a bad row or an unknown variant name.
func SetPrimary(vs []Variant, specs []string) ([]Variant, []compare.Key, error) {
	var all []compare.Key
	per := map[string][]compare.Key{}
	for _, s := range specs {
		name, row, scoped := strings.Cut(s, "=")
		if !scoped {
			row = s
		}
		k, err := compare.ParseKey(row)
		if err != nil {
			return nil, nil, fmt.Errorf("--primary %q: %w", s, err)
		}
		if !scoped {
			all = append(all, k)
			continue
		}
		found := false
		for _, v := range vs {
			found = found || v.Name == name
		}
		if !found {
			return nil, nil, fmt.Errorf("--primary %q: no --variant named %q", s, name)
		}
		per[name] = append(per[name], k)
	}
	out := make([]Variant, len(vs))
	for i, v := range vs {
		keys := append(append([]compare.Key(nil), all...), per[v.Name]...)
		if len(keys) > 0 {
			v.Primary = keys
		}
		out[i] = v
	}
	return out, all, nil
}
