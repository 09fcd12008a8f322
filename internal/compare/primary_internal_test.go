package compare

import "testing"

// The primary verdict combines the decided primary rows: one direction
// wins, opposite directions are mixed, the noise guard overrides, and
// only missing rows give n/a. Exploratory rows never count.
func TestPrimaryVerdictCombination(t *testing.T) {
	row := func(role string, v Verdict) Row { return Row{Role: role, Verdict: v} }
	for _, c := range []struct {
		rows []Row
		want Verdict
	}{
		{[]Row{row(RolePrimary, Better), row(RolePrimary, NoDifference), row(RoleExploratory, Worse)}, Better},
		{[]Row{row(RolePrimary, NoDifference), row(RoleExploratory, Better)}, NoDifference},
		{[]Row{row(RolePrimary, Better), row(RolePrimary, Worse)}, Mixed},
		{[]Row{row(RolePrimary, Worse), row(RolePrimary, Worse)}, Worse},
		{[]Row{row(RolePrimary, Better), row(RolePrimary, Starved)}, Starved},
		{[]Row{row(RolePrimary, NotApplicable), row(RoleExploratory, Better)}, NotApplicable},
		{[]Row{row(RolePrimary, NotApplicable), row(RolePrimary, OneRoundEach)}, OneRoundEach},
		// as internal/compare/doc.go documents: a neutral row's higher
		// beside a better row is mixed; an n/a row does not count
		// against a decided one; equal values alone are undecided.
		{[]Row{row(RolePrimary, Better), row(RolePrimary, Higher)}, Mixed},
		{[]Row{row(RolePrimary, NotApplicable), row(RolePrimary, Worse)}, Worse},
		{[]Row{row(RolePrimary, NoDifference), row(RolePrimary, NotApplicable)}, OneRoundEach},
	} {
		undecided := NoDifference
		if c.want == OneRoundEach {
			undecided = OneRoundEach
		}
		if got := primaryVerdict(c.rows, undecided); got != c.want {
			t.Errorf("%+v: %s, want %s", c.rows, got, c.want)
		}
	}
}

// Holm runs within each family: p = 0.02 and 0.03 as the two primary
// rows are both significant (0.02 <= 0.025, 0.03 <= 0.05), while in one
// family with three more rows at 0.5 the second is not (0.03 > 0.0125).
func TestFamiliesAreSeparate(t *testing.T) {
	rows := []Row{{P: 0.02, Role: RolePrimary}, {P: 0.03, Role: RolePrimary}, {P: 0.5, Role: RoleExploratory},
		{P: 0.5, Role: RoleExploratory}, {P: 0.5, Role: RoleExploratory}, {P: nan, Role: RoleExploratory}}
	sig, np, ne := familySignificance(rows, 0.05)
	if !sig[0] || !sig[1] || sig[2] || np != 2 || ne != 3 {
		t.Fatalf("two families: %v %d %d", sig, np, ne)
	}
	for i := range rows {
		rows[i].Role = ""
	}
	sig, np, ne = familySignificance(rows, 0.05)
	if sig[0] || sig[1] || np != 0 || ne != 5 {
		t.Fatalf("one family: %v %d %d", sig, np, ne)
	}
}
